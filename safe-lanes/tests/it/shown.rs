//! `Shown`: text from outside made safe to print, and escaped exactly once.

use proptest::prelude::*;
use safe_lanes::Shown;

/// Characters a screen would hide or act on: controls, bidi and zero-width formats, the BOM,
/// line and paragraph separators.
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
        || matches!(c, '\u{FEFF}' | '\u{2028}' | '\u{2029}')
}

const HOSTILE: &str =
    "[a\\\\/ \u{1b}\n\r\t\u{7f}\u{85}\u{202E}\u{2066}\u{200B}\u{FEFF}\u{2028}é{}u]{0,300}";

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// A message made of shown text is left as it is: nothing is escaped twice.
    #[test]
    fn a_message_of_shown_text_is_that_text(raw in HOSTILE) {
        let shown = Shown::text(&raw).to_string();
        prop_assert_eq!(Shown::message(&shown).to_string(), shown.clone());
        let wrapped = format!("reading {shown}: refused");
        prop_assert_eq!(Shown::message(&wrapped).to_string(), wrapped);
    }

    /// Whatever a message holds, nothing hidden is printed; a backslash stays one backslash.
    #[test]
    fn a_message_hides_nothing(raw in HOSTILE) {
        let message = Shown::message(&raw).to_string();
        prop_assert!(!message.chars().any(hidden), "{:?}", message);
        prop_assert_eq!(
            message.matches('\\').count(),
            raw.matches('\\').count() + raw.chars().filter(|&c| hidden(c)).count()
        );
    }
}

#[test]
fn text_escapes_a_backslash_and_message_keeps_it() {
    assert_eq!(Shown::text("a\\b\u{1b}").to_string(), "a\\\\b\\u{1b}");
    assert_eq!(Shown::message("a\\b\u{1b}").to_string(), "a\\b\\u{1b}");
}

#[test]
fn an_error_displays_its_code_then_its_message_and_has_no_source() {
    use std::error::Error as _;
    let io = safe_lanes::Error::io(
        "openat2",
        std::path::Path::new("a\u{202e}b"),
        std::io::Error::from_raw_os_error(2),
    );
    let refusal = safe_lanes::Error::ReadOnly {
        alias: "docs".into(),
    };
    for (err, message) in [
        (
            &io,
            format!(
                "openat2 a\\u{{202e}}b: {}",
                std::io::Error::from_raw_os_error(2)
            ),
        ),
        (&refusal, "docs: the folder is granted read-only".to_owned()),
    ] {
        assert_eq!(err.message().to_string(), message);
        assert_eq!(
            err.to_string(),
            format!("{}: {message}", err.code().as_str())
        );
        assert!(err.source().is_none(), "{err}");
    }
}
