#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Property tests: canonical URLs are fixed points, key order never matters,
//! different actions never share canonical JSON, unlisted hosts are refused
//! whatever the resolver says, and any non-public address in an answer is
//! refused.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use countersign_canonical_policy::{
    Action, DEFAULT_METHODS, Denial, MAX_ARGUMENT_VALUE_BYTES, MAX_DESCRIPTION_BYTES,
    MAX_SAFE_INTEGER, MAX_SELECTOR_BYTES, NON_PUBLIC_V4, NON_PUBLIC_V6_IN_GLOBAL, NOT_AUTHORIZED,
    PUBLIC_V4_EXCEPTIONS, PUBLIC_V6_EXCEPTIONS, Policy, ResolveError, Resolver, StaticResolver,
    is_public,
};
use proptest::prelude::*;
use serde_json::{Value, json};

fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}

/// Records every name it is asked for; answers a fixed list.
#[derive(Clone, Default)]
struct Recording {
    calls: Arc<Mutex<Vec<String>>>,
    answer: Vec<IpAddr>,
}

impl Resolver for Recording {
    fn resolve<'life0, 'life1, 'async_trait>(
        &'life0 self,
        host: &'life1 str,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<IpAddr>, ResolveError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        self.calls.lock().unwrap().push(host.to_owned());
        let answer = self.answer.clone();
        Box::pin(async move { Ok(answer) })
    }
}

const PUBLIC: Ipv4Addr = Ipv4Addr::new(93, 184, 216, 34);

fn destination_policy(resolver: impl Resolver + 'static) -> Policy {
    Policy::builder()
        .allow_hosts(["allowed.com", "*.example.com", "bücher.example"])
        .resolver(resolver)
        .build()
        .unwrap()
}

// ---------------------------------------------------------------------------
// Strategies: URLs on allowed hosts.

/// Changes the case of each character at random (`ü` → `Ü` too).
fn random_case(text: &'static str) -> impl Strategy<Value = String> {
    proptest::collection::vec(any::<bool>(), text.chars().count()).prop_map(move |flips| {
        text.chars()
            .zip(flips)
            .map(|(c, up)| {
                if up {
                    c.to_uppercase().collect::<String>()
                } else {
                    c.to_string()
                }
            })
            .collect()
    })
}

fn allowed_host() -> impl Strategy<Value = String> {
    let name = prop_oneof![
        random_case("allowed.com"),
        random_case("a.example.com"),
        random_case("deep.sub.example.com"),
        random_case("bücher.example"),
        Just("xn--bcher-kva.example".to_owned()),
    ];
    (name, any::<bool>()).prop_map(|(name, dot)| if dot { format!("{name}.") } else { name })
}

fn url_on_allowed_host() -> impl Strategy<Value = String> {
    (
        random_case("https"),
        allowed_host(),
        prop_oneof![
            Just(""),
            Just(":443"),
            Just(":0443"),
            Just(":8443"),
            Just(":1")
        ],
        proptest::collection::vec(
            prop_oneof![
                Just("..".to_owned()),
                Just(".".to_owned()),
                Just("%2e".to_owned()),
                Just("%2E%2e".to_owned()),
                Just("%41".to_owned()),
                Just("@evil.com".to_owned()),
                Just("a b".to_owned()),
                Just("é".to_owned()),
                Just("\u{2028}".to_owned()),
                Just("\\".to_owned()),
                "[a-zA-Z0-9._~!$&'()*+,;=:@%-]{0,8}",
            ],
            0..6,
        ),
        proptest::option::of("[a-zA-Z0-9=&%/?:@ é-]{0,12}"),
        proptest::option::of("[a-zA-Z0-9=&%/?#:@ é-]{0,12}"),
    )
        .prop_map(|(scheme, host, port, segments, query, fragment)| {
            let mut url = format!("{scheme}://{host}{port}/{}", segments.join("/"));
            if let Some(q) = query {
                url.push('?');
                url.push_str(&q);
            }
            if let Some(f) = fragment {
                url.push('#');
                url.push_str(&f);
            }
            url
        })
}

// ---------------------------------------------------------------------------
// Strategies: actions.

#[derive(Debug, Clone, PartialEq)]
struct Spec {
    method: String,
    selector: String,
    description: Option<String>,
    arguments: Vec<(String, Value)>,
}

impl Spec {
    /// The spec as a JSON object (the order of keys does not survive `Value`).
    fn to_value(&self) -> Value {
        let mut object = serde_json::Map::new();
        object.insert("method".into(), json!(self.method));
        object.insert("selector".into(), json!(self.selector));
        if let Some(d) = &self.description {
            object.insert("description".into(), json!(d));
        }
        if !self.arguments.is_empty() {
            object.insert(
                "arguments".into(),
                Value::Object(self.arguments.iter().cloned().collect()),
            );
        }
        Value::Object(object)
    }

    /// The spec as JSON text, with keys in the order given by the permutations
    /// and random insignificant whitespace.
    fn to_text(&self, top_order: &[usize], argument_order: &[usize], spaces: &[&str]) -> String {
        let mut space = spaces.iter().cycle();
        let mut ws = || *space.next().unwrap();
        let string = |s: &str| serde_json::to_string(s).unwrap();
        let arguments = argument_order
            .iter()
            .map(|&i| {
                let (k, v) = &self.arguments[i];
                format!("{}:{}", string(k), serde_json::to_string(v).unwrap())
            })
            .collect::<Vec<_>>();
        let mut members = vec![
            format!("\"method\":{}", string(&self.method)),
            format!("\"selector\":{}", string(&self.selector)),
            match &self.description {
                Some(d) => format!("\"description\":{}", string(d)),
                None => "\"description\":null".to_owned(),
            },
            format!("\"arguments\":{{{}}}", arguments.join(",")),
        ];
        members = top_order.iter().map(|&i| members[i].clone()).collect();
        let mut out = format!("{}{{", ws());
        for (i, member) in members.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(ws());
            out.push_str(member);
            out.push_str(ws());
        }
        out.push('}');
        out
    }
}

/// Text that trims to itself: starts and ends with a visible character.
fn field_text(max_inner: usize) -> impl Strategy<Value = String> {
    (
        "[a-zA-Z#.]",
        proptest::collection::vec(
            prop_oneof![
                "[a-zA-Z0-9 #.>:=\\[\\]'-]",
                Just("\"".to_owned()),
                Just("\\".to_owned()),
                Just("\u{2028}".to_owned()),
                Just("é".to_owned()),
                Just("e\u{301}".to_owned()),
                Just("😀".to_owned()),
            ],
            0..max_inner,
        ),
        "[a-zA-Z0-9\\]]",
    )
        .prop_map(|(a, inner, z)| format!("{a}{}{z}", inner.concat()))
}

/// The largest number magnitude an argument may have.
const SAFE: i64 = MAX_SAFE_INTEGER as i64;

fn argument_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<String>().prop_map(Value::String),
        "[ \\n\\t\"\\\\\u{2028}é]{0,6}".prop_map(Value::String),
        (-SAFE..=SAFE).prop_map(Value::from),
        (0..=SAFE as u64).prop_map(Value::from),
        (-1.0e6f64..1.0e6).prop_map(Value::from),
        any::<bool>().prop_map(Value::Bool),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        proptest::sample::select(DEFAULT_METHODS),
        field_text(12),
        proptest::option::of(field_text(12)),
        proptest::collection::btree_map("[A-Za-z0-9_.-]{1,8}", argument_value(), 0..6),
    )
        .prop_map(|(method, selector, description, arguments)| Spec {
            method: method.to_owned(),
            selector,
            description,
            arguments: arguments.into_iter().collect(),
        })
}

fn action_policy() -> Policy {
    Policy::builder()
        .allow_host("docs.example.com")
        .resolver(StaticResolver::new())
        .build()
        .unwrap()
}

/// What may be inserted into a text field; none of these is removed by trimming
/// when it sits between two visible characters.
const INJECTIONS: &[&str] = &[
    "\"", "\\", "\u{2028}", "\u{2029}", "\u{301}", "é", "e\u{301}", " ", "x", "\u{a0}", "\u{200b}",
];
/// Only argument values may hold control characters.
const VALUE_INJECTIONS: &[&str] = &["\n", "\r", "\t", "\u{0}", "\u{7f}"];

fn insert_inside(text: &str, at: usize, what: &str) -> String {
    // Between two characters, never at either end (trimming would eat spaces there).
    let boundaries: Vec<usize> = text.char_indices().map(|(i, _)| i).skip(1).collect();
    if boundaries.is_empty() {
        return format!("{text}{what}{text}");
    }
    let i = boundaries[at % boundaries.len()];
    format!("{}{what}{}", &text[..i], &text[i..])
}

#[derive(Debug, Clone)]
enum Mutation {
    Method(usize),
    Selector(usize, &'static str),
    Description(usize, &'static str),
    DropDescription,
    ArgumentValue(usize, usize, &'static str),
    ArgumentKey(usize, String),
    AddArgument(String, String),
    RemoveArgument(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let inject = proptest::sample::select(INJECTIONS);
    let inject_value = proptest::sample::select([INJECTIONS, VALUE_INJECTIONS].concat());
    prop_oneof![
        (1..DEFAULT_METHODS.len()).prop_map(Mutation::Method),
        (any::<usize>(), inject.clone()).prop_map(|(a, s)| Mutation::Selector(a, s)),
        (any::<usize>(), inject).prop_map(|(a, s)| Mutation::Description(a, s)),
        Just(Mutation::DropDescription),
        (any::<usize>(), any::<usize>(), inject_value)
            .prop_map(|(i, a, s)| Mutation::ArgumentValue(i, a, s)),
        (any::<usize>(), "[A-Za-z0-9_.-]{1,8}").prop_map(|(i, k)| Mutation::ArgumentKey(i, k)),
        ("[A-Za-z0-9_.-]{1,8}", any::<String>()).prop_map(|(k, v)| Mutation::AddArgument(k, v)),
        any::<usize>().prop_map(Mutation::RemoveArgument),
    ]
}

/// Applies `mutation`; `None` when it would not change the action.
fn mutate(base: &Spec, mutation: &Mutation) -> Option<Spec> {
    let mut out = base.clone();
    match mutation {
        Mutation::Method(step) => {
            let i = DEFAULT_METHODS.iter().position(|m| *m == base.method)?;
            out.method = DEFAULT_METHODS[(i + step) % DEFAULT_METHODS.len()].to_owned();
        }
        Mutation::Selector(at, what) => {
            out.selector = insert_inside(&base.selector, *at, what);
            // The default description follows the selector, so the action changes either way.
        }
        Mutation::Description(at, what) => {
            let d = base.description.clone()?;
            out.description = Some(insert_inside(&d, *at, what));
        }
        Mutation::DropDescription => {
            let d = base.description.as_ref()?;
            if *d == format!("{} {}", base.method, base.selector) {
                return None;
            }
            out.description = None;
        }
        Mutation::ArgumentValue(i, at, what) => {
            if base.arguments.is_empty() {
                return None;
            }
            let i = i % base.arguments.len();
            let text = argument_text(&base.arguments[i].1);
            out.arguments[i].1 = Value::String(insert_inside(&format!("v{text}v"), *at, what));
            // The caller compares against a base whose value is also wrapped in `v…v`.
        }
        Mutation::ArgumentKey(i, key) => {
            if base.arguments.is_empty() || base.arguments.iter().any(|(k, _)| k == key) {
                return None;
            }
            let i = i % base.arguments.len();
            out.arguments[i].0 = key.clone();
        }
        Mutation::AddArgument(key, value) => {
            if base.arguments.iter().any(|(k, _)| k == key) || base.arguments.len() >= 32 {
                return None;
            }
            out.arguments
                .push((key.clone(), Value::String(value.clone())));
        }
        Mutation::RemoveArgument(i) => {
            if base.arguments.is_empty() {
                return None;
            }
            out.arguments.remove(i % base.arguments.len());
        }
    }
    Some(out)
}

fn argument_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

// ---------------------------------------------------------------------------
// Strategies: addresses.

fn public_address() -> impl Strategy<Value = IpAddr> {
    // Drawn from ranges known to be ordinary global unicast, not from `is_public`.
    prop_oneof![
        any::<u8>().prop_map(|d| IpAddr::V4(Ipv4Addr::new(93, 184, 216, d))),
        any::<u16>().prop_map(|x| IpAddr::V4(Ipv4Addr::new(8, 8, (x >> 8) as u8, x as u8))),
        any::<u64>()
            .prop_map(|x| IpAddr::V6(Ipv6Addr::from((0x2606_2800_u128 << 96) | u128::from(x)))),
        any::<u32>()
            .prop_map(|x| IpAddr::V6(Ipv6Addr::from((0x2a00_1450_u128 << 96) | u128::from(x)))),
    ]
}

fn non_public_address() -> impl Strategy<Value = IpAddr> {
    let mut blocks: Vec<(u128, u8, bool)> = NON_PUBLIC_V4
        .iter()
        .map(|(n, l, _)| (u128::from(u32::from(*n)), *l, true))
        .chain(
            NON_PUBLIC_V6_IN_GLOBAL
                .iter()
                .map(|(n, l, _)| (u128::from(*n), *l, false)),
        )
        .collect();
    for (net, len) in [
        ("::1", 128),
        ("::", 128),
        ("::ffff:0:0", 96),
        ("fc00::", 7),
        ("fe80::", 10),
        ("fec0::", 10),
        ("ff00::", 8),
        ("64:ff9b:1::", 48),
        ("100::", 64),
    ] {
        blocks.push((u128::from(net.parse::<Ipv6Addr>().unwrap()), len, false));
    }
    (proptest::sample::select(blocks), any::<u128>())
        .prop_map(|((net, len, v4), random)| {
            let width = if v4 { 32 } else { 128 };
            let host_bits = width - u32::from(len);
            let mask = if host_bits == 0 {
                0
            } else {
                u128::MAX >> (128 - host_bits)
            };
            let value = net | (random & mask);
            if v4 {
                IpAddr::V4(Ipv4Addr::from(u32::try_from(value).unwrap()))
            } else {
                IpAddr::V6(Ipv6Addr::from(value))
            }
        })
        .prop_filter("inside a public exception", |addr| {
            let inside = |net: u128, len: u8, width: u32, value: u128| {
                let host_bits = width - u32::from(len);
                let mask = if host_bits == 0 {
                    0
                } else {
                    u128::MAX >> (128 - host_bits)
                };
                value & !mask == net
            };
            match addr {
                IpAddr::V4(a) => !PUBLIC_V4_EXCEPTIONS.iter().any(|(n, l, _)| {
                    inside(u128::from(u32::from(*n)), *l, 32, u128::from(u32::from(*a)))
                }),
                IpAddr::V6(a) => !PUBLIC_V6_EXCEPTIONS
                    .iter()
                    .any(|(n, l, _)| inside(u128::from(*n), *l, 128, u128::from(*a))),
            }
        })
}

fn any_address() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        public_address(),
        non_public_address(),
        any::<u32>().prop_map(|x| IpAddr::V4(Ipv4Addr::from(x))),
        any::<u128>().prop_map(|x| IpAddr::V6(Ipv6Addr::from(x))),
    ]
}

/// Host names that are not on `allowed.com`, `*.example.com`, `bücher.example`,
/// many of them built to look like those.
fn unlisted_host() -> impl Strategy<Value = String> {
    let label = "[a-z][a-z0-9-]{0,8}[a-z0-9]";
    prop_oneof![
        (label, label).prop_map(|(a, b)| format!("{a}.{b}")),
        label.prop_map(|x| format!("allowed.com.{x}")),
        label.prop_map(|x| format!("{x}allowed.com")),
        label.prop_map(|x| format!("{x}.allowed.com")),
        label.prop_map(|x| format!("allowed.{x}")),
        label.prop_map(|x| format!("{x}example.com")),
        label.prop_map(|x| format!("{x}.example.com.{x}")),
        label.prop_map(|x| format!("example.com.{x}")),
        Just("example.com".to_owned()),
        Just("bucher.example".to_owned()),
        label.prop_map(|x| format!("{x}.bücher.example")),
        (label, "[A-Z]{1,3}").prop_map(|(a, b)| format!("{a}.{b}")),
    ]
    .prop_filter("listed", |h| {
        let h = h.to_ascii_lowercase();
        let h = h.strip_suffix('.').unwrap_or(&h);
        h != "allowed.com"
            && !(h.ends_with(".example.com") && h.len() > ".example.com".len())
            && h != "bücher.example"
            && h != "xn--bcher-kva.example"
    })
}

// ---------------------------------------------------------------------------

// ---------------------------------------------------------------------------
// Strategies: any proposed action, valid or not, maximal sizes included.

/// Text of about `len` bytes (up to 3 more), from characters that trimming,
/// escaping and the control-character rule treat differently.
fn sized_text(len: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            8 => Just("s"),
            1 => Just(" "),
            1 => Just("é"),
            1 => Just("😀"),
            1 => Just("\u{2028}"),
            1 => Just("\""),
            1 => Just("\n"),
            1 => Just("\u{3000}"),
        ],
        1..8,
    )
    .prop_map(move |pieces| {
        let mut out = String::new();
        for piece in pieces.iter().cycle() {
            if out.len() >= len {
                break;
            }
            out.push_str(piece);
        }
        out
    })
}

/// A length near a limit, or small.
fn length_near(limit: usize) -> impl Strategy<Value = usize> {
    prop_oneof![
        0..24usize,
        (limit - 8)..(limit + 4),
        (limit / 2 - 4)..(limit / 2 + 4)
    ]
}

fn any_method() -> impl Strategy<Value = Value> {
    prop_oneof![
        8 => (proptest::sample::select(DEFAULT_METHODS), "[ \\t\\n]{0,2}")
            .prop_map(|(m, pad)| Value::String(format!("{pad}{}{pad}", m.to_uppercase()))),
        8 => proptest::sample::select(DEFAULT_METHODS).prop_map(|m| Value::String(m.to_owned())),
        1 => "[a-z ]{0,8}".prop_map(Value::String),
        1 => Just(Value::Null),
    ]
}

fn any_selector() -> impl Strategy<Value = Value> {
    prop_oneof![
        10 => length_near(MAX_SELECTOR_BYTES).prop_flat_map(sized_text).prop_map(Value::String),
        // Selectors whose default description crosses the description limit.
        10 => (1010..1030usize).prop_flat_map(sized_text).prop_map(Value::String),
        1 => Just(Value::from(7)),
    ]
}

fn any_description() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        4 => Just(None),
        1 => Just(Some(Value::Null)),
        1 => Just(Some(Value::String(" \n".to_owned()))),
        6 => length_near(MAX_DESCRIPTION_BYTES)
            .prop_flat_map(sized_text)
            .prop_map(|t| Some(Value::String(t))),
        1 => Just(Some(Value::Bool(true))),
    ]
}

fn any_argument_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => length_near(MAX_ARGUMENT_VALUE_BYTES).prop_flat_map(sized_text).prop_map(Value::String),
        2 => argument_value(),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
        1 => any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        1 => Just(Value::Null),
        1 => Just(json!([1])),
    ]
}

fn any_arguments() -> impl Strategy<Value = Option<Value>> {
    let key = prop_oneof![
        8 => "[A-Za-z0-9_.-]{1,64}",
        1 => "[A-Za-z0-9_.-]{64,66}",
        1 => "[a-z é]{0,3}",
    ];
    prop_oneof![
        1 => Just(None),
        1 => Just(Some(Value::Null)),
        6 => proptest::collection::btree_map(key, any_argument_value(), 0..34)
            .prop_map(|m| Some(Value::Object(m.into_iter().collect()))),
    ]
}

/// A proposed action: mostly well-formed, every field up to and across its limit.
fn any_proposal() -> impl Strategy<Value = Value> {
    (
        any_method(),
        any_selector(),
        any_description(),
        any_arguments(),
    )
        .prop_map(|(method, selector, description, arguments)| {
            let mut object = serde_json::Map::new();
            object.insert("method".into(), method);
            object.insert("selector".into(), selector);
            if let Some(d) = description {
                object.insert("description".into(), d);
            }
            if let Some(a) = arguments {
                object.insert("arguments".into(), a);
            }
            Value::Object(object)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every action the policy accepts reads back from its canonical JSON as
    /// itself, and its JSON form (the `action` object of an `ok` result)
    /// re-authorises to the same digest.
    #[test]
    fn every_accepted_action_reads_back_as_itself(proposal in any_proposal()) {
        let policy = action_policy();
        let Ok(action) = policy.authorize_action(&proposal) else {
            return Ok(());
        };
        let text = action.canonical_json();
        let read = Action::from_canonical_json(&text)
            .unwrap_or_else(|e| panic!("canonical json of {proposal} does not read back: {e}"));
        prop_assert_eq!(&read, &action);
        prop_assert_eq!(read.digest(), action.digest());
        let again = policy
            .authorize_action(&action.to_json_value())
            .unwrap_or_else(|e| panic!("json form of {proposal} is refused: {e}"));
        prop_assert_eq!(&again, &action);
        let reparsed = policy
            .authorize_action(&serde_json::from_str(&text).unwrap())
            .unwrap_or_else(|e| panic!("parsed canonical json of {proposal} is refused: {e}"));
        prop_assert_eq!(reparsed.digest(), action.digest());
        prop_assert!(action.selector().len() <= MAX_SELECTOR_BYTES);
        let default = [action.method(), action.selector()].join(" ");
        prop_assert!(
            action.description().len() <= MAX_DESCRIPTION_BYTES || action.description() == default
        );
        prop_assert!(action.arguments().values().all(|v| v.len() <= MAX_ARGUMENT_VALUE_BYTES));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn canonical_url_reauthorises_to_itself(input in url_on_allowed_host()) {
        let policy = destination_policy(StaticResolver::answering_all([IpAddr::V4(PUBLIC)]));
        let first = block_on(policy.authorize_destination(&input))
            .unwrap_or_else(|e| panic!("{input:?} refused: {e}"));
        let second = block_on(policy.authorize_destination(first.as_str()))
            .unwrap_or_else(|e| panic!("canonical {:?} of {input:?} refused: {e}", first.as_str()));
        prop_assert_eq!(first.as_str(), second.as_str(), "input {:?}", input);
        prop_assert_eq!(first.addresses(), second.addresses());
        prop_assert!(!first.host().ends_with('.'));
        prop_assert_eq!(first.host().to_owned(), first.host().to_ascii_lowercase());
        prop_assert!(first.as_str().starts_with("https://"));
    }

    #[test]
    fn permuting_keys_never_changes_the_digest(
        spec in spec(),
        top in Just(vec![0usize, 1, 2, 3]).prop_shuffle(),
        seed in proptest::collection::vec(any::<usize>(), 8),
        spaces in proptest::collection::vec(prop_oneof![Just(""), Just(" "), Just("\n"), Just("\t  ")], 1..12),
    ) {
        let policy = action_policy();
        // The reference goes through the JSON parser too, so both sides see
        // the same parsed numbers whatever serde_json's float features are.
        let in_order: Vec<usize> = (0..spec.arguments.len()).collect();
        let reference_text = spec.to_text(&[0, 1, 2, 3], &in_order, &[""]);
        let reference = policy
            .authorize_action(&serde_json::from_str(&reference_text).unwrap())
            .unwrap();
        // A permutation of the argument keys from the random seed.
        let mut order: Vec<usize> = (0..spec.arguments.len()).collect();
        for (i, s) in seed.iter().enumerate().take(order.len()) {
            let j = s % order.len();
            order.swap(i, j);
        }
        let text = spec.to_text(&top, &order, &spaces);
        let parsed: Value = serde_json::from_str(&text).unwrap();
        let action = policy.authorize_action(&parsed).unwrap();
        prop_assert_eq!(action.canonical_json(), reference.canonical_json(), "text {}", text);
        prop_assert_eq!(action.digest(), reference.digest());
    }

    #[test]
    fn actions_differing_in_any_field_never_share_canonical_json(
        base in spec(),
        mutation in mutation(),
    ) {
        let policy = action_policy();
        let Some(changed) = mutate(&base, &mutation) else {
            return Ok(());
        };
        // Argument-value mutations wrap the value in `v…v`; compare like with like.
        let base = match &mutation {
            Mutation::ArgumentValue(i, ..) => {
                let mut b = base.clone();
                let i = i % b.arguments.len();
                b.arguments[i].1 = Value::String(format!("v{}v", argument_text(&b.arguments[i].1)));
                b
            }
            _ => base,
        };
        prop_assume!(base != changed);
        let a = policy.authorize_action(&base.to_value()).unwrap();
        let b = policy.authorize_action(&changed.to_value())
            .unwrap_or_else(|e| panic!("{mutation:?} made the action invalid: {e}"));
        prop_assert_ne!(&a, &b, "{:?}", mutation);
        prop_assert_ne!(a.canonical_json(), b.canonical_json(), "{:?}", mutation);
        prop_assert_ne!(a.digest(), b.digest());
    }

    #[test]
    fn canonical_json_is_injective(a in spec(), b in spec()) {
        let policy = action_policy();
        let a = policy.authorize_action(&a.to_value()).unwrap();
        let b = policy.authorize_action(&b.to_value()).unwrap();
        prop_assert_eq!(a == b, a.canonical_json() == b.canonical_json());
        // The canonical JSON holds everything: it rebuilds the same action.
        prop_assert_eq!(Action::from_canonical_json(&a.canonical_json()).unwrap(), a);
    }

    #[test]
    fn unlisted_host_is_refused_whatever_the_resolver_says(
        host in unlisted_host(),
        answer in proptest::collection::vec(any_address(), 0..4),
        path in "[a-z/]{0,8}",
    ) {
        let resolver = Recording { calls: Arc::default(), answer };
        let policy = destination_policy(resolver.clone());
        let url = format!("https://{host}/{path}");
        let denial = block_on(policy.authorize_destination(&url))
            .err()
            .unwrap_or_else(|| panic!("{url} was authorised"));
        prop_assert_eq!(denial.code(), NOT_AUTHORIZED);
        prop_assert!(
            matches!(denial, Denial::HostNotAllowed { .. } | Denial::UnparsableUrl { .. }),
            "{url}: {denial:?}"
        );
        prop_assert!(resolver.calls.lock().unwrap().is_empty(), "{} reached the resolver", url);
    }

    #[test]
    fn answer_with_any_non_public_address_is_refused(
        public in proptest::collection::vec(public_address(), 0..5),
        bad in proptest::collection::vec(non_public_address(), 1..3),
        positions in proptest::collection::vec(any::<usize>(), 2),
        host in allowed_host(),
    ) {
        let mut answer = public;
        for (i, addr) in bad.iter().enumerate() {
            let at = positions[i % positions.len()] % (answer.len() + 1);
            answer.insert(at, *addr);
        }
        let policy = destination_policy(StaticResolver::answering_all(answer.clone()));
        let denial = block_on(policy.authorize_destination(&format!("https://{host}/")))
            .err()
            .unwrap_or_else(|| panic!("answer {answer:?} was accepted"));
        match denial {
            Denial::NonPublicAddress { address, .. } => {
                prop_assert!(bad.contains(&address), "{} is not one of {:?}", address, bad);
                prop_assert!(!is_public(address));
            }
            other => prop_assert!(false, "expected NonPublicAddress, got {:?}", other),
        }
    }

    #[test]
    fn all_public_answer_is_accepted_and_returned(
        answer in proptest::collection::vec(public_address(), 1..6),
        host in allowed_host(),
    ) {
        let policy = destination_policy(StaticResolver::answering_all(answer.clone()));
        let url = block_on(policy.authorize_destination(&format!("https://{host}/"))).unwrap();
        let mut expected = answer;
        expected.sort();
        expected.dedup();
        prop_assert_eq!(url.addresses(), expected.as_slice());
    }
}

// ---------------------------------------------------------------------------
// The named near-misses, each in every text field.

#[test]
fn near_miss_texts_never_share_canonical_json() {
    let policy = action_policy();
    let pairs: &[(&str, &str)] = &[
        ("ab", "a\nb"),
        ("ab", "a\"b"),
        ("ab", "a\\b"),
        ("a\\nb", "a\nb"),
        ("a\\\"b", "a\"b"),
        ("ab", "a\u{2028}b"),
        ("a\u{2028}b", "a\u{2029}b"),
        ("a\u{2028}b", "a\\u2028b"),
        ("caf\u{e9}", "cafe\u{301}"),
        ("a b", "a  b"),
        ("ab", "a\u{a0}b"),
    ];
    for (x, y) in pairs {
        let in_value =
            |v: &str| json!({"method": "fill", "selector": "#q", "arguments": {"value": v}});
        let in_key_order =
            |v: &str| json!({"method": "fill", "selector": "#q", "arguments": {"a": v, "b": "x"}});
        let mut candidates = vec![
            (in_value(x), in_value(y)),
            (in_key_order(x), in_key_order(y)),
        ];
        // Selector and description refuse control characters.
        if !x.contains('\n') && !y.contains('\n') {
            let sel = |v: &str| json!({"method": "click", "selector": v});
            let desc = |v: &str| json!({"method": "click", "selector": "a", "description": v});
            candidates.push((sel(x), sel(y)));
            candidates.push((desc(x), desc(y)));
        }
        for (a, b) in candidates {
            let a = policy.authorize_action(&a).unwrap();
            let b = policy.authorize_action(&b).unwrap();
            assert_ne!(a.canonical_json(), b.canonical_json(), "{x:?} vs {y:?}");
            assert_ne!(a.digest(), b.digest(), "{x:?} vs {y:?}");
        }
    }
}

#[test]
fn fields_do_not_bleed_into_each_other() {
    // Moving text between fields, or between key and value, changes the digest.
    let policy = action_policy();
    let digest = |v: Value| policy.authorize_action(&v).unwrap().digest();
    let a = digest(json!({"method": "click", "selector": "a b"}));
    let b = digest(json!({"method": "click", "selector": "a", "description": "b"}));
    let c = digest(json!({"method": "click", "selector": "a", "description": "click a b"}));
    let d = digest(json!({"method": "click", "selector": "a b", "description": "click a b"}));
    assert_ne!(a, b);
    assert_ne!(a, c);
    assert_eq!(
        a, d,
        "an explicit description equal to the default is the same action"
    );
    let e = digest(json!({"method": "fill", "selector": "#q", "arguments": {"ab": "c"}}));
    let f = digest(json!({"method": "fill", "selector": "#q", "arguments": {"a": "bc"}}));
    let g = digest(json!({"method": "fill", "selector": "#q", "arguments": {"a": "b", "c": ""}}));
    assert_ne!(e, f);
    assert_ne!(f, g);
}
