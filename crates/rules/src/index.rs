//! Which rules of a set can match a target at all, from three facts known
//! before any element is read: the destination's host, the action's
//! method and the name patterns that matched. A decision runs the full
//! match only on these candidates, so a rule the index leaves out is one
//! whose host, method or name condition fails; the rules' order, and so
//! the precedence, is unchanged.

use std::collections::HashMap;

use crate::pattern::HostPattern;

/// Most rules in one set: the index keeps one bit per rule.
pub const MAX_RULES: usize = 1000;

/// Words of a rule bitset: one bit per rule, up to [`MAX_RULES`].
const WORDS: usize = MAX_RULES.div_ceil(64);

/// One bit per rule, in the set's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bits([u64; WORDS]);

impl Bits {
    const EMPTY: Bits = Bits([0; WORDS]);

    fn set(&mut self, rule: usize) {
        if let Some(word) = self.0.get_mut(rule / 64) {
            *word |= 1 << (rule % 64);
        }
    }

    fn or(&mut self, other: &Bits, words: usize) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()).take(words) {
            *a |= b;
        }
    }

    fn and(&mut self, other: &Bits, words: usize) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()).take(words) {
            *a &= b;
        }
    }

    /// The rules whose bit is set, in order.
    pub(crate) fn ones(&self, words: usize) -> impl Iterator<Item = usize> + '_ {
        self.0
            .iter()
            .take(words)
            .enumerate()
            .flat_map(|(w, &word)| {
                let mut rest = word;
                std::iter::from_fn(move || {
                    if rest == 0 {
                        return None;
                    }
                    let bit = rest.trailing_zeros() as usize;
                    rest &= rest - 1;
                    Some(w * 64 + bit)
                })
            })
    }
}

/// What the index reads of one rule: its host, method and name conditions
/// (`None`: no such condition).
pub(crate) struct IndexedConditions<'a> {
    pub(crate) hosts: Option<&'a [HostPattern]>,
    pub(crate) methods: Option<&'a [String]>,
    pub(crate) names: Option<&'a [usize]>,
}

/// The candidates of every host, method and matched name pattern.
#[derive(Debug, Clone)]
pub(crate) struct RuleIndex {
    words: usize,
    any_host: Bits,
    exact_hosts: HashMap<String, Bits>,
    other_hosts: Vec<(HostPattern, Bits)>,
    any_method: Bits,
    methods: HashMap<String, Bits>,
    no_names: Bits,
    by_pattern: Vec<Bits>,
}

impl RuleIndex {
    /// The index of `rules` (at most [`MAX_RULES`]) whose name conditions
    /// name `patterns` patterns of the set in all.
    pub(crate) fn new<'a>(
        rules: impl Iterator<Item = IndexedConditions<'a>>,
        patterns: usize,
    ) -> RuleIndex {
        let mut index = RuleIndex {
            words: 0,
            any_host: Bits::EMPTY,
            exact_hosts: HashMap::new(),
            other_hosts: Vec::new(),
            any_method: Bits::EMPTY,
            methods: HashMap::new(),
            no_names: Bits::EMPTY,
            by_pattern: vec![Bits::EMPTY; patterns],
        };
        let mut count = 0;
        for (rule, conditions) in rules.enumerate() {
            count = rule + 1;
            match conditions.hosts {
                None => index.any_host.set(rule),
                Some(hosts) => {
                    for pattern in hosts {
                        if pattern.is_any() {
                            index.any_host.set(rule);
                        } else if let Some(host) = pattern.exact_host() {
                            index
                                .exact_hosts
                                .entry(host.to_owned())
                                .or_insert(Bits::EMPTY)
                                .set(rule);
                        } else {
                            match index.other_hosts.iter_mut().find(|(p, _)| p == pattern) {
                                Some((_, bits)) => bits.set(rule),
                                None => {
                                    let mut bits = Bits::EMPTY;
                                    bits.set(rule);
                                    index.other_hosts.push((pattern.clone(), bits));
                                }
                            }
                        }
                    }
                }
            }
            match conditions.methods {
                None => index.any_method.set(rule),
                Some(methods) => {
                    for method in methods {
                        index
                            .methods
                            .entry(method.clone())
                            .or_insert(Bits::EMPTY)
                            .set(rule);
                    }
                }
            }
            match conditions.names {
                None => index.no_names.set(rule),
                Some(names) => {
                    for &pattern in names {
                        if let Some(bits) = index.by_pattern.get_mut(pattern) {
                            bits.set(rule);
                        }
                    }
                }
            }
        }
        index.words = count.div_ceil(64);
        index
    }

    /// How many words the set's rules take.
    pub(crate) fn words(&self) -> usize {
        self.words
    }

    /// The rules whose host, method and name conditions can hold for
    /// `host`, `method` and the name patterns that matched (`None`: no
    /// element, so no name pattern matched).
    pub(crate) fn candidates(
        &self,
        host: &str,
        method: &str,
        names: Option<&regex::SetMatches>,
    ) -> Bits {
        let words = self.words;
        let mut by_host = self.any_host;
        if let Some(bits) = self.exact_hosts.get(host) {
            by_host.or(bits, words);
        }
        for (pattern, bits) in &self.other_hosts {
            if pattern.matches(host) {
                by_host.or(bits, words);
            }
        }
        let mut by_method = self.any_method;
        if let Some(bits) = self.methods.get(method) {
            by_method.or(bits, words);
        }
        let mut by_name = self.no_names;
        if let Some(names) = names {
            for pattern in names.iter() {
                if let Some(bits) = self.by_pattern.get(pattern) {
                    by_name.or(bits, words);
                }
            }
        }
        by_host.and(&by_method, words);
        by_host.and(&by_name, words);
        by_host
    }
}
