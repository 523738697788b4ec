//! The one set of characters the pages flag: those an approver cannot see,
//! that look like another character, or that change how the text around
//! them reads. Every value from a model, a page or the host that the pages
//! show goes through [`Shown`](crate::view::Shown), which asks
//! [`is_invisible`]; nothing else decides what gets an escaped copy.
//!
//! The set is Unicode's `Default_Ignorable_Code_Point` property (Unicode
//! 16), the control characters (`Cc`), the line and paragraph separators,
//! every space but U+0020 (each looks like it and is not it: in a selector
//! or an argument it changes what matches or what is typed), and the
//! letters and symbols fonts draw as blanks (U+2800, U+1D159). Characters
//! that show as something (the Arabic number signs U+0600–U+0605, for
//! instance) are not in it.

/// The ranges, inclusive, each with what it holds (for the docs and the
/// tests; the pages show only the code points).
pub(crate) const INVISIBLE: &[(char, char, &str)] = &[
    ('\u{0000}', '\u{001f}', "C0 controls"),
    ('\u{007f}', '\u{009f}', "delete and the C1 controls"),
    ('\u{00a0}', '\u{00a0}', "no-break space"),
    ('\u{00ad}', '\u{00ad}', "soft hyphen"),
    ('\u{034f}', '\u{034f}', "combining grapheme joiner"),
    ('\u{061c}', '\u{061c}', "Arabic letter mark"),
    (
        '\u{115f}',
        '\u{1160}',
        "Hangul choseong and jungseong fillers",
    ),
    ('\u{1680}', '\u{1680}', "Ogham space mark"),
    ('\u{17b4}', '\u{17b5}', "Khmer inherent vowels"),
    (
        '\u{180b}',
        '\u{180f}',
        "Mongolian free variation selectors and vowel separator",
    ),
    ('\u{2000}', '\u{200a}', "en quad to hair space"),
    (
        '\u{200b}',
        '\u{200f}',
        "zero-width space, non-joiner and joiner, left-to-right and right-to-left marks",
    ),
    ('\u{2028}', '\u{2029}', "line and paragraph separators"),
    (
        '\u{202a}',
        '\u{202e}',
        "bidirectional embeddings, pop and overrides",
    ),
    ('\u{202f}', '\u{202f}', "narrow no-break space"),
    ('\u{205f}', '\u{205f}', "medium mathematical space"),
    (
        '\u{2060}',
        '\u{206f}',
        "word joiner, invisible operators, bidirectional isolates, deprecated format characters",
    ),
    ('\u{2800}', '\u{2800}', "Braille pattern blank"),
    ('\u{3000}', '\u{3000}', "ideographic space"),
    ('\u{3164}', '\u{3164}', "Hangul filler"),
    ('\u{fe00}', '\u{fe0f}', "variation selectors"),
    (
        '\u{feff}',
        '\u{feff}',
        "zero-width no-break space (byte order mark)",
    ),
    ('\u{ffa0}', '\u{ffa0}', "halfwidth Hangul filler"),
    ('\u{fff0}', '\u{fff8}', "unassigned specials"),
    ('\u{fff9}', '\u{fffb}', "interlinear annotation characters"),
    (
        '\u{13430}',
        '\u{1343f}',
        "Egyptian hieroglyph format controls",
    ),
    ('\u{1bca0}', '\u{1bca3}', "shorthand format controls"),
    ('\u{1d159}', '\u{1d159}', "musical symbol null notehead"),
    ('\u{1d173}', '\u{1d17a}', "musical symbol format characters"),
    (
        '\u{e0000}',
        '\u{e0fff}',
        "tags, variation selectors supplement and reserved ignorables",
    ),
];

/// Whether `c` is in [`INVISIBLE`].
pub(crate) fn is_invisible(c: char) -> bool {
    // Most text is printable ASCII: answer it without the table.
    if (' '..='~').contains(&c) {
        return false;
    }
    INVISIBLE
        .iter()
        .any(|&(first, last, _)| (first..=last).contains(&c))
}

/// `text` with every invisible character written `\u{…}` (lower-case hex,
/// at least four digits), or `None` when it holds none.
pub(crate) fn escaped(text: &str) -> Option<String> {
    if !text.chars().any(is_invisible) {
        return None;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_invisible(c) {
            out.push_str(&format!("\\u{{{:04x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code point the issue names, and each range's ends.
    #[test]
    fn each_listed_code_point_is_invisible() {
        let listed = [
            0x0000, 0x0009, 0x000a, 0x001b, 0x001f, 0x007f, 0x0080, 0x0085, 0x009b, 0x009f, 0x00a0,
            0x00ad, 0x034f, 0x061c, 0x115f, 0x1160, 0x1680, 0x17b4, 0x17b5, 0x180b, 0x180e, 0x180f,
            0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a,
            0x200b, 0x200c, 0x200d, 0x200e, 0x200f, 0x2028, 0x2029, 0x202a, 0x202b, 0x202c, 0x202d,
            0x202e, 0x202f, 0x205f, 0x2060, 0x2061, 0x2062, 0x2063, 0x2064, 0x2065, 0x2066, 0x2067,
            0x2068, 0x2069, 0x206a, 0x206b, 0x206c, 0x206d, 0x206e, 0x206f, 0x2800, 0x3000, 0x3164,
            0xfe00, 0xfe01, 0xfe0e, 0xfe0f, 0xfeff, 0xffa0, 0xfff0, 0xfff8, 0xfff9, 0xfffa, 0xfffb,
            0x13430, 0x1343f, 0x1bca0, 0x1bca3, 0x1d159, 0x1d173, 0x1d174, 0x1d175, 0x1d176,
            0x1d177, 0x1d178, 0x1d179, 0x1d17a, 0xe0000, 0xe0001, 0xe0020, 0xe0041, 0xe007f,
            0xe0100, 0xe01ef, 0xe0fff,
        ];
        for code in listed {
            let c = char::from_u32(code).unwrap_or_default();
            assert_eq!(u32::from(c), code);
            assert!(is_invisible(c), "U+{code:04X} is not flagged");
            assert_eq!(
                escaped(&format!("a{c}b")),
                Some(format!("a\\u{{{code:04x}}}b")),
                "U+{code:04X}"
            );
        }
    }

    /// The ranges are sorted and disjoint, and every character outside
    /// them, up to U+FFFF and at the planes' edges, is shown as it is.
    #[test]
    fn nothing_else_is_flagged() {
        for pair in INVISIBLE.windows(2) {
            assert!(pair[0].1 < pair[1].0, "{pair:?}");
        }
        for (first, last, what) in INVISIBLE {
            assert!(first <= last, "{what}");
            assert!(!what.is_empty());
        }
        let inside = |c: char| INVISIBLE.iter().any(|&(a, b, _)| a <= c && c <= b);
        let mut visible = 0;
        for code in (0..=0xffff)
            .chain(0x1_0000..=0x1_00ff)
            .chain(0xe1000..=0xe10ff)
        {
            let Some(c) = char::from_u32(code) else {
                continue; // surrogates
            };
            assert_eq!(is_invisible(c), inside(c), "U+{code:04X}");
            if !inside(c) {
                visible += 1;
                assert_eq!(escaped(&c.to_string()), None, "U+{code:04X}");
            }
        }
        assert!(visible > 60_000);
        for shown in [
            ' ',
            'a',
            '~',
            '¡',
            'é',
            '€',
            '\u{0600}',
            '\u{2010}',
            '\u{2027}',
            '\u{2030}',
            '\u{205e}',
            '\u{2070}',
            '\u{27ff}',
            '\u{2801}',
            '\u{3001}',
            '\u{3163}',
            '\u{3165}',
            '\u{fdff}',
            '\u{fe10}',
            '\u{fefe}',
            '\u{ff9f}',
            '\u{ffa1}',
            '\u{fffc}',
            '\u{fffd}',
            '\u{1d158}',
            '\u{1d15a}',
            '\u{1d172}',
            '\u{1d17b}',
            '\u{1f600}',
            '\u{dffff}',
            '\u{e1000}',
        ] {
            assert!(!is_invisible(shown), "{shown:?} is flagged");
        }
    }

    #[test]
    fn the_escaped_copy_marks_each_invisible_character() {
        assert_eq!(escaped("a#docs <b>"), None);
        assert_eq!(escaped(""), None);
        assert_eq!(
            escaped("open the docs\u{202e}lla eteleD").as_deref(),
            Some("open the docs\\u{202e}lla eteleD")
        );
        assert_eq!(
            escaped("pay\u{202e}evil\nx\u{200b}\u{e0041}\u{3000}").as_deref(),
            Some("pay\\u{202e}evil\\u{000a}x\\u{200b}\\u{e0041}\\u{3000}")
        );
    }
}
