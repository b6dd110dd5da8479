//! An uploader command line, and the rule that keeps what an agent names out of its code.
//!
//! A template is the human's (`gws drive files create --json '{"name": "{name:json}"}'
//! --upload {file}`); the values of its placeholders are the agent's: `{name}` is a name the
//! agent chose, `{file}` names content the agent wrote. No shell reads the arguments, so a
//! value is passed as it is. What could still turn a value into code is a program of the
//! template that *runs code it is handed*: a shell's `-c` script or script file, an
//! interpreter's inline code or script, a `sed` script, a `jq` filter, the command line `ssh`
//! hands to a remote shell. [`Reads`] says, for a template, from which word on its arguments
//! are data; a placeholder standing in or before the code is refused when the template is
//! configured. The rule fails closed: an option it does not know in front of the code, code
//! from standard input, a program known to run code whose arguments it does not parse, or a
//! program named by a placeholder each make every word code.

use std::ffi::OsString;
use std::path::Path;

use crate::child::Limits;
use crate::error::{Error, Result, Shown};

/// The placeholder replaced by the staged file's name in the uploader's arguments: always a
/// whole argument.
pub(crate) const FILE_PLACEHOLDER: &str = "{file}";
/// The placeholder replaced by the content's human-facing name, as it is.
pub(crate) const NAME_PLACEHOLDER: &str = "{name}";
/// The placeholder replaced by the human-facing name escaped for a JSON string, without the
/// quotes (`--json '{"name": "{name:json}"}'`).
pub(crate) const NAME_JSON_PLACEHOLDER: &str = "{name:json}";

/// An uploader command: a program and its arguments, `{file}` standing for the staged file,
/// `{name}` and `{name:json}` for the name the content goes by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uploader {
    program: OsString,
    args: Vec<OsString>,
    limits: Limits,
}

impl Uploader {
    /// `program args…`; where no argument is `{file}`, the staged file is appended.
    ///
    /// # Errors
    ///
    /// `invalid_argument`, naming the rule, when
    /// - `{file}` stands inside a larger argument: the staged file is passed only as an
    ///   argument of its own;
    /// - the program holds a placeholder;
    /// - a placeholder stands where a program of the template reads code (see the module
    ///   documentation): in a shell's or an interpreter's code, before it, in an option, in
    ///   the program `env` or another wrapper runs, anywhere in a command `ssh` runs remotely.
    ///   Only arguments *after* the code are data: `sh -c 'up --title "$1" "$2"' sh {name}
    ///   {file}`.
    pub fn new(
        program: impl Into<OsString>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> Result<Self> {
        let program = program.into();
        let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        let refuse = |word: &OsString, why: &str| Error::InvalidArgument {
            what: Shown::text(&word.to_string_lossy()),
            why: why.into(),
        };
        if holds_placeholder(&program) {
            return Err(refuse(
                &program,
                "the uploader's program is fixed by the human: no placeholder may stand in it",
            ));
        }
        if let Some(word) = args.iter().find(|a| {
            holds(a, FILE_PLACEHOLDER) && a.as_encoded_bytes() != FILE_PLACEHOLDER.as_bytes()
        }) {
            return Err(refuse(
                word,
                "`{file}` must be a whole argument of the uploader (it is passed as one, never \
                 inside a command line a shell reads); to hand it to a shell, pass it as `\"$1\"`",
            ));
        }
        let mut words = Vec::with_capacity(args.len() + 1);
        words.push(program.clone());
        words.extend(args.iter().cloned());
        let data_from = match Reads::of(&words) {
            Reads::NoCode => 1,
            Reads::DataAfter(code) => code + 1,
            Reads::All => words.len(),
        };
        if let Some(word) = words[..data_from.min(words.len())]
            .iter()
            .find(|w| holds_placeholder(w))
        {
            return Err(refuse(
                word,
                "a program of this uploader runs code it is handed (a shell, an interpreter, \
                 sed, jq, a remote command): `{file}`, `{name}` and `{name:json}` may only stand \
                 in arguments after that code, never in it, before it or in an option \
                 (`sh -c 'upload --title \"$1\" \"$2\"' sh {name} {file}`)",
            ));
        }
        Ok(Self {
            program,
            args,
            limits: Limits::default(),
        })
    }

    /// Parse a command line template such as `gws drive files create --upload {file}` (shell
    /// quoting rules, no shell involved).
    ///
    /// # Errors
    ///
    /// `invalid_argument` when the template is empty or its quoting is unbalanced, and as
    /// [`Uploader::new`].
    pub fn parse(template: &str) -> Result<Self> {
        let words = shlex::split(template).filter(|w| !w.is_empty());
        let Some(mut words) = words else {
            return Err(Error::InvalidArgument {
                what: Shown::text(template),
                why: "not a command: empty, or unbalanced quotes".into(),
            });
        };
        let program = words.remove(0);
        Self::new(program, words)
    }

    /// Bound the uploader's run time and kept output.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The program.
    pub(crate) fn program(&self) -> &OsString {
        &self.program
    }

    /// Its run time and output bounds.
    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    /// The arguments with `{file}` replaced by `file`, `{name}` by `name` as it is and
    /// `{name:json}` by `name` escaped for a JSON string, in one pass over each argument: a
    /// value put in is never looked at again (a name holding `{name}` stays that text).
    pub(crate) fn args_for(&self, file: &Path, name: &str) -> Vec<OsString> {
        let json = serde_json::to_string(name).unwrap_or_default();
        let json = json
            .strip_prefix('"')
            .and_then(|j| j.strip_suffix('"'))
            .unwrap_or_default();
        let mut has_file = false;
        let mut args: Vec<OsString> = self
            .args
            .iter()
            .map(|arg| {
                if arg.as_encoded_bytes() == FILE_PLACEHOLDER.as_bytes() {
                    has_file = true;
                    return file.as_os_str().to_owned();
                }
                substitute(
                    arg.as_encoded_bytes(),
                    &[(NAME_JSON_PLACEHOLDER, json), (NAME_PLACEHOLDER, name)],
                )
            })
            .collect();
        if !has_file {
            args.push(file.as_os_str().to_owned());
        }
        args
    }
}

/// `arg` with each placeholder of `values` replaced by its value, left to right, in one pass.
fn substitute(arg: &[u8], values: &[(&str, &str)]) -> OsString {
    let mut out = Vec::with_capacity(arg.len());
    let mut at = 0;
    'scan: while at < arg.len() {
        for (placeholder, value) in values {
            if arg[at..].starts_with(placeholder.as_bytes()) {
                out.extend_from_slice(value.as_bytes());
                at += placeholder.len();
                continue 'scan;
            }
        }
        out.push(arg[at]);
        at += 1;
    }
    std::os::unix::ffi::OsStringExt::from_vec(out)
}

fn holds(word: &OsString, placeholder: &str) -> bool {
    word.as_encoded_bytes()
        .windows(placeholder.len())
        .any(|w| w == placeholder.as_bytes())
}

fn holds_placeholder(word: &OsString) -> bool {
    [FILE_PLACEHOLDER, NAME_PLACEHOLDER, NAME_JSON_PLACEHOLDER]
        .iter()
        .any(|p| holds(word, p))
}

/// From which word on a template's arguments are data ([module documentation](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reads {
    /// No program of the template is known to run code it is handed: every argument is data.
    NoCode,
    /// The word at this index is code (or names it: a script, a module); what follows is data.
    DataAfter(usize),
    /// Any word may be code.
    All,
}

/// Shells: `-c` (in a cluster of short options) takes the code, else the first operand is the
/// script file; the options that take a value of their own; long options known to take none.
const SHELLS: &[&str] = &[
    "sh", "bash", "rbash", "dash", "zsh", "fish", "ksh", "ksh93", "mksh", "oksh", "pdksh", "ash",
    "yash", "posh", "csh", "tcsh",
];
const SHELL_VALUE_LETTERS: &[char] = &['o', 'O'];
const SHELL_LONG_VALUES: &[&str] = &["--rcfile", "--init-file", "--init-command"];
const SHELL_LONG_FLAGS: &[&str] = &[
    "--norc",
    "--noprofile",
    "--login",
    "--posix",
    "--noediting",
    "--restricted",
    "--verbose",
    "--no-config",
    "--private",
    "--no-execute",
    "--interactive",
];

/// How an interpreter reads its code: the options that take code (`-e`); whether the first
/// such option ends the options (`python -c`); the options that take a value of their own;
/// the options known to take none. The first operand, when no option gave code, is the
/// script (for `sed` and `jq`, the script or filter itself).
struct Interpreter {
    names: &'static [&'static str],
    code: &'static [&'static str],
    code_ends_options: bool,
    values: &'static [&'static str],
    flags: &'static [&'static str],
}

const INTERPRETERS: &[Interpreter] = &[
    Interpreter {
        names: &["python", "pypy"],
        code: &["-c", "-m"],
        code_ends_options: true,
        values: &["-W", "-X"],
        flags: &[
            "-B", "-b", "-bb", "-d", "-E", "-I", "-i", "-O", "-OO", "-P", "-q", "-s", "-S", "-u",
            "-v", "-x",
        ],
    },
    Interpreter {
        names: &["perl"],
        code: &["-e", "-E"],
        code_ends_options: false,
        values: &[],
        flags: &["-w", "-W", "-X", "-T", "-t", "-l", "-n", "-p", "-a", "-s"],
    },
    Interpreter {
        names: &["ruby"],
        code: &["-e"],
        code_ends_options: false,
        values: &["-r", "-I"],
        flags: &["-w", "-W", "-v", "-d", "-n", "-p", "-a", "-l"],
    },
    Interpreter {
        names: &["node", "nodejs"],
        code: &["-e", "--eval", "-p", "--print"],
        code_ends_options: false,
        values: &["-r", "--require", "--import", "--loader"],
        flags: &["--no-warnings", "--trace-warnings", "--enable-source-maps"],
    },
    Interpreter {
        names: &["php"],
        code: &["-r"],
        code_ends_options: false,
        values: &["-d", "-c"],
        flags: &["-n", "-q"],
    },
    Interpreter {
        names: &["lua", "luajit"],
        code: &["-e"],
        code_ends_options: false,
        values: &[],
        flags: &["-i", "-v", "-W"],
    },
    Interpreter {
        names: &["awk", "gawk", "mawk", "nawk"],
        code: &["-f", "--file"],
        code_ends_options: false,
        values: &["-F", "-v", "--field-separator", "--assign"],
        flags: &[],
    },
    Interpreter {
        names: &["sed", "gsed"],
        code: &["-e", "--expression", "-f", "--file"],
        code_ends_options: false,
        values: &[],
        flags: &["-n", "-E", "-r", "-s", "-u", "-z", "--quiet", "--silent"],
    },
    Interpreter {
        names: &["jq", "gojq", "jaq"],
        code: &["-f", "--from-file"],
        code_ends_options: false,
        values: &["--indent"],
        flags: &[
            "-r",
            "-c",
            "-n",
            "-s",
            "-e",
            "-j",
            "-a",
            "-S",
            "-C",
            "-M",
            "--tab",
            "--raw-output",
            "--compact-output",
            "--null-input",
            "--slurp",
            "--exit-status",
            "--join-output",
            "--ascii-output",
            "--sort-keys",
            "--args",
            "--jsonargs",
        ],
    },
];

/// Programs known to run code they are handed whose arguments this rule does not parse: a
/// placeholder anywhere in a template with one of them is refused.
const OPAQUE: &[&str] = &[
    "pwsh",
    "powershell",
    "nu",
    "elvish",
    "xonsh",
    "rc",
    "es",
    "tclsh",
    "wish",
    "expect",
    "Rscript",
    "R",
    "julia",
    "deno",
    "bun",
    "osascript",
    "guile",
    "racket",
    "sbcl",
    "php-cgi",
    "psql",
    "mysql",
    "sqlite3",
    "duckdb",
    "make",
    "gdb",
    "vim",
    "nvim",
    "emacs",
    "parallel",
];

/// Programs that hand their arguments to a shell as one command line (here or on another
/// machine): a placeholder anywhere in a template with one of them is refused.
const JOINERS: &[&str] = &[
    "ssh", "rsh", "scp", "rsync", "sshpass", "watch", "su", "script", "mosh", "unbuffer",
];

/// Programs that run the program named by their first operand (after their options, numbers
/// and assignments): that word is looked at as a program of the template.
const WRAPPERS: &[&str] = &[
    "env",
    "busybox",
    "timeout",
    "nice",
    "nohup",
    "setsid",
    "stdbuf",
    "sudo",
    "doas",
    "xargs",
    "flock",
    "exec",
    "command",
    "time",
    "chrt",
    "ionice",
    "taskset",
    "unshare",
    "nsenter",
    "chroot",
    "runuser",
    "setpriv",
    "systemd-run",
    "firejail",
    "bwrap",
    "catchsegv",
    "strace",
    "ltrace",
    "valgrind",
    "caffeinate",
    "nix-shell",
    "uv",
    "uvx",
    "pipx",
    "npx",
    "poetry",
];

impl Reads {
    /// Where the data of the template `words` (program first) begins.
    pub(crate) fn of(words: &[OsString]) -> Self {
        let mut at = 0;
        while let Some(word) = words.get(at) {
            if holds_placeholder(word) {
                // A program the agent would name.
                return Self::All;
            }
            let program = base(word);
            if JOINERS.contains(&program.as_str()) || OPAQUE.contains(&program.as_str()) {
                return Self::All;
            }
            if is_shell(&program) {
                return shell(words, at);
            }
            if let Some(interpreter) = interpreter_named(&program) {
                return interpreted(interpreter, words, at);
            }
            if program == "env" {
                match after_env(words, at + 1) {
                    Some(next) => at = next,
                    None => return Self::All,
                }
                continue;
            }
            if WRAPPERS.contains(&program.as_str()) {
                at = after_options(words, at + 1);
                continue;
            }
            // Any other program: its arguments are its own, unless one of them is a program
            // that runs code (a wrapper this rule does not know): then the rule goes on from
            // there.
            return match words[at + 1..].iter().position(|w| runs_code(&base(w))) {
                Some(next) => Self::of_from(words, at + 1 + next),
                None => Self::NoCode,
            };
        }
        Self::NoCode
    }

    /// [`Reads::of`] from the word at `at` on, every word before it counting as code.
    fn of_from(words: &[OsString], at: usize) -> Self {
        match Self::of(&words[at..]) {
            Self::NoCode => Self::DataAfter(at),
            Self::DataAfter(code) => Self::DataAfter(at + code),
            Self::All => Self::All,
        }
    }
}

/// The last part of a program's path.
fn base(word: &OsString) -> String {
    let bytes = word.as_encoded_bytes();
    let name = bytes.rsplit(|&b| b == b'/').next().unwrap_or(bytes);
    String::from_utf8_lossy(name).into_owned()
}

/// Whether `program` is `name` with a version after it, or none (`python3.13t`, `bash5`).
fn named(program: &str, name: &str) -> bool {
    program.strip_prefix(name).is_some_and(|version| {
        version
            .chars()
            .all(|c| c.is_ascii_digit() || c == '.' || c == 't')
    })
}

fn is_shell(program: &str) -> bool {
    SHELLS.iter().any(|name| named(program, name))
}

/// `python3`, `python3.12`, `python3.13t`, `perl5.36`: an interpreter's name and a version.
fn interpreter_named(program: &str) -> Option<&'static Interpreter> {
    INTERPRETERS
        .iter()
        .find(|i| i.names.iter().any(|name| named(program, name)))
}

fn runs_code(program: &str) -> bool {
    is_shell(program)
        || interpreter_named(program).is_some()
        || OPAQUE.contains(&program)
        || JOINERS.contains(&program)
}

/// A shell at `words[at]`.
fn shell(words: &[OsString], at: usize) -> Reads {
    let code_at = |i: usize| {
        if i < words.len() {
            Reads::DataAfter(i)
        } else {
            Reads::All
        }
    };
    let mut i = at + 1;
    while let Some(word) = words.get(i) {
        let word = word.to_string_lossy();
        match &*word {
            "-" => return Reads::All,
            "--" => return code_at(i + 1),
            w if SHELL_LONG_VALUES.contains(&w) => i += 2,
            w if SHELL_LONG_FLAGS.contains(&w) => i += 1,
            w if w.starts_with("--") => return Reads::All,
            w if (w.starts_with('-') || w.starts_with('+'))
                && w.len() > 1
                && w[1..].chars().all(|c| c.is_ascii_alphabetic()) =>
            {
                // A cluster of short options: `-c` takes the code, `-o`/`-O` a value (fish's
                // `-C` takes code run first: a value before the code).
                if w.starts_with('-') && w.contains('c') {
                    return code_at(i + 1);
                }
                // `-s`: the code comes from standard input.
                if w.starts_with('-') && w.contains('s') {
                    return Reads::All;
                }
                let values = w[1..]
                    .chars()
                    .filter(|c| SHELL_VALUE_LETTERS.contains(c) || *c == 'C')
                    .count();
                i += 1 + values;
            }
            w if w.starts_with('-') || w.starts_with('+') => return Reads::All,
            // The script file.
            _ => return Reads::DataAfter(i),
        }
    }
    // The code comes from standard input.
    Reads::All
}

/// An interpreter at `words[at]`.
fn interpreted(interpreter: &Interpreter, words: &[OsString], at: usize) -> Reads {
    let mut code = None;
    let mut i = at + 1;
    while let Some(word) = words.get(i) {
        let word = word.to_string_lossy();
        if interpreter.code.contains(&&*word) {
            if i + 1 >= words.len() {
                return Reads::All;
            }
            code = Some(i + 1);
            if interpreter.code_ends_options {
                return Reads::DataAfter(i + 1);
            }
            i += 2;
        } else if interpreter.values.contains(&&*word) {
            i += 2;
        } else if interpreter.flags.contains(&&*word) {
            i += 1;
        } else if word == "--" {
            return match code {
                Some(_) => Reads::DataAfter(i),
                None if i + 1 < words.len() => Reads::DataAfter(i + 1),
                None => Reads::All,
            };
        } else if word.starts_with('-') && word != "-" {
            // An option this rule does not know: it may take a value that looks like an
            // operand, or be code itself.
            return Reads::All;
        } else {
            // The first operand: data after code given by options, else the script itself.
            return match code {
                Some(_) => Reads::DataAfter(i - 1),
                None if word == "-" => Reads::All,
                None => Reads::DataAfter(i),
            };
        }
    }
    match code {
        Some(_) => Reads::DataAfter(words.len() - 1),
        None => Reads::All,
    }
}

/// The index of the program `env` runs, its options and assignments from `from` on skipped;
/// `None` when `env` splits a string into words (`-S`, in any cluster) or is given an option
/// this rule does not know.
fn after_env(words: &[OsString], from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(word) = words.get(i) {
        let word = word.to_string_lossy();
        match &*word {
            "--" => return Some(i + 1),
            "-i" | "-0" | "-v" | "--ignore-environment" | "--null" | "--debug" => i += 1,
            "-u" | "-C" | "--unset" | "--chdir" => i += 2,
            w if w.starts_with("--unset=") || w.starts_with("--chdir=") => i += 1,
            w if w.starts_with("--split-string") => return None,
            w if w.starts_with('-') && w.len() > 1 && !w.starts_with("--") => {
                // A cluster: `S` splits a string; `u` or `C` at its end takes the next word.
                if w.contains('S') {
                    return None;
                }
                if !w[1..].chars().all(|c| "i0vuC".contains(c)) {
                    return None;
                }
                i += if w.ends_with('u') || w.ends_with('C') {
                    2
                } else {
                    1
                };
            }
            w if w.starts_with('-') => return None,
            w if w.contains('=') => i += 1,
            _ => return Some(i),
        }
    }
    Some(i)
}

/// The index of the first word from `from` on that is not an option, a number or duration,
/// or an assignment: the program a wrapper runs, by its usual shape.
fn after_options(words: &[OsString], from: usize) -> usize {
    let mut i = from;
    while let Some(word) = words.get(i) {
        let word = word.to_string_lossy();
        let digits = word.strip_suffix(['s', 'm', 'h', 'd']).unwrap_or(&word);
        let number = digits.starts_with(|c: char| c.is_ascii_digit())
            && digits.chars().all(|c| c.is_ascii_digit() || c == '.');
        if word.starts_with('-') || word.starts_with('+') || number || word.contains('=') {
            i += 1;
        } else {
            break;
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name the lane would never give (its `\` is a separator there) is escaped all the same.
    #[test]
    fn the_json_placeholder_escapes_what_json_strings_escape() {
        let uploader =
            Uploader::parse("up --json '{\"name\": \"{name:json}\"}' --title {name}").unwrap();
        let name = "a\\b \"c\" \u{1}\n\u{7f} é";
        let args = uploader.args_for(Path::new("f.txt"), name);
        let json = args[1].to_str().unwrap();
        let parsed: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(parsed["name"], name);
        assert_eq!(args[3], name, "as it is");
        assert_eq!(args[4], "f.txt", "appended");
    }

    /// Regression: `{name:json}` was replaced first and the result scanned again for
    /// `{name}`, so a name holding `{name}` put the raw name into the JSON.
    #[test]
    fn a_value_put_in_is_never_substituted_again() {
        let uploader = Uploader::parse("up --json '{\"title\": \"{name:json}\"}' {name}").unwrap();
        let name = "{name}\",\"shared\":true,\"a\":\"{name:json}";
        let args = uploader.args_for(Path::new("f"), name);
        let parsed: serde_json::Value = serde_json::from_str(args[1].to_str().unwrap()).unwrap();
        assert_eq!(parsed, serde_json::json!({ "title": name }));
        assert_eq!(args[2], name);
    }

    fn reads(template: &str) -> Reads {
        let words: Vec<OsString> = shlex::split(template)
            .unwrap()
            .into_iter()
            .map(Into::into)
            .collect();
        Reads::of(&words)
    }

    #[test]
    fn where_the_code_is() {
        for (template, expected) in [
            ("gws drive files create --upload {file}", Reads::NoCode),
            ("sh -c 'up \"$1\"' sh {file}", Reads::DataAfter(2)),
            ("bash -euo pipefail -c 'x' bash", Reads::DataAfter(4)),
            ("bash script.sh a", Reads::DataAfter(1)),
            ("bash -s a", Reads::All),
            ("bash", Reads::All),
            ("bash --weird x", Reads::All),
            ("python3 -c 'x' a", Reads::DataAfter(2)),
            ("python3.13t -I -m mod a", Reads::DataAfter(3)),
            ("python3 -W ignore up.py a", Reads::DataAfter(3)),
            ("python3 --check-hash-based-pycs never -c x", Reads::All),
            ("perl -e 1 -e 'print 2' a", Reads::DataAfter(4)),
            ("perl -I lib -e x", Reads::All),
            ("node --input-type module -e x", Reads::All),
            ("sed -e s/a/b/ -e s/c/d/ file", Reads::DataAfter(4)),
            ("sed s/a/b/ file", Reads::DataAfter(1)),
            ("jq -r '.a' file", Reads::DataAfter(2)),
            ("awk -F : '{print}' file", Reads::DataAfter(3)),
            ("env -i PATH=/bin dash -ec 'x' a", Reads::DataAfter(5)),
            ("env -iS 'sh -c x'", Reads::All),
            ("env -vS'sh -c x'", Reads::All),
            ("timeout 60 sh -c 'x' sh a", Reads::DataAfter(4)),
            ("sudo -u bob bash -c x", Reads::DataAfter(5)),
            ("mywrapper --flag sh -c 'x' a", Reads::DataAfter(4)),
            ("ssh host up", Reads::All),
            ("deno eval x", Reads::All),
            ("env {name}", Reads::All),
            ("busybox sh -c x a", Reads::DataAfter(3)),
        ] {
            assert_eq!(reads(template), expected, "{template}");
        }
    }
}
