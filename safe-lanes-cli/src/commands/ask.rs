//! Questions on the terminal: each says what it accepts and asks again until it gets it; the
//! end of input (Ctrl-D) is an answer of its own, never an error. Questions and what is said
//! around them go to stderr, so stdout stays the result's.

use std::io::{BufRead, IsTerminal, Write};

use anyhow::Result;

/// Whether the human is at a terminal (standard input is one).
pub(crate) fn terminal() -> bool {
    std::io::stdin().is_terminal()
}

/// Say `text` on the terminal (stderr), with a newline.
pub(crate) fn say(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{}", text.trim_end());
    let _ = err.flush();
}

/// Ask `question`: the answer's line, trimmed, or `None` at the end of input (Ctrl-D).
pub(crate) fn line(question: &str) -> Result<Option<String>> {
    let mut err = std::io::stderr().lock();
    err.write_all(question.as_bytes())?;
    err.flush()?;
    drop(err);
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line)? == 0 {
        // The cursor is still after the question.
        say("");
        return Ok(None);
    }
    Ok(Some(line.trim().to_owned()))
}

/// Ask `question` until one of `choices` (each: the words that choose it, first the short
/// one) is typed, in any case; anything else is answered with `accepted`. `None` at the end of
/// input.
pub(crate) fn choice<T: Copy>(
    question: &str,
    choices: &[(&[&str], T)],
    accepted: &str,
) -> Result<Option<T>> {
    loop {
        let Some(typed) = line(question)? else {
            return Ok(None);
        };
        let typed = typed.to_lowercase();
        if let Some((_, chosen)) = choices.iter().find(|(words, _)| words.contains(&&*typed)) {
            return Ok(Some(*chosen));
        }
        say(accepted);
    }
}

/// Ask `question` until something is typed (`needed` says why an empty answer will not do);
/// `None` at the end of input.
pub(crate) fn required(question: &str, needed: &str) -> Result<Option<String>> {
    loop {
        match line(question)? {
            None => return Ok(None),
            Some(typed) if typed.is_empty() => say(needed),
            Some(typed) => return Ok(Some(typed)),
        }
    }
}

/// What a reason prompt says when nothing was typed.
pub(crate) const REASON_NEEDED: &str =
    "a reason is needed: the changelog keeps why each change was made (Ctrl-D to give up)";

/// The reason for a change: `given` (`--reason`) when there is one; otherwise asked on a
/// terminal until one is typed. Without a terminal, or at the end of input, `given` as it is:
/// the library refuses a change without a reason, and says so.
pub(crate) fn reason(given: &str, question: &str) -> Result<String> {
    if !given.trim().is_empty() || !terminal() {
        return Ok(given.to_owned());
    }
    Ok(required(question, REASON_NEEDED)?.unwrap_or_default())
}

/// Ask a yes-or-no `question`, `[y/N]`: only `y` or `yes` is yes; an empty answer or the end
/// of input is no; anything else is asked again.
pub(crate) fn yes(question: &str) -> Result<bool> {
    let choices: &[(&[&str], bool)] = &[(&["y", "yes"], true), (&["n", "no", ""], false)];
    Ok(choice(
        question,
        choices,
        "please answer y (yes) or n (no); Enter alone is no",
    )?
    .unwrap_or(false))
}
