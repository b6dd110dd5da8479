//! Completions loaded into the real shells and asked for commands and flags; one manual page
//! per command, each with EXIT STATUS, ENVIRONMENT and FILES, and every page it refers to
//! there.

use std::process::Command;

use crate::util::Env;

/// What bash completes for the words `line` (the last one being typed), with the script of
/// `safe-lanes completions bash` loaded.
fn bash_completes(env: &Env, line: &[&str]) -> Vec<String> {
    let script = env.tmp.path().join("safe-lanes.bash");
    std::fs::write(&script, env.run(&["completions", "bash"], b"").stdout).unwrap();
    let words: Vec<String> = line.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source '{}'\n\
         COMP_WORDS=({})\n\
         COMP_CWORD={}\n\
         COMP_LINE='{}'\n\
         COMP_POINT=${{#COMP_LINE}}\n\
         _safe__lanes safe-lanes '{}' '{}'\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script.display(),
        words.join(" "),
        line.len() - 1,
        line.join(" "),
        line[line.len() - 1],
        line[line.len() - 2],
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &program])
        .current_dir(env.cwd())
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Regression: below the top level, the generated bash script matched no case arm (its
/// arms were misspelt), so `safe-lanes grant <Tab>` listed files.
#[test]
fn bash_completes_commands_and_flags_at_every_level() {
    let env = Env::new();
    std::fs::write(env.cwd().join("a-file-here"), "").unwrap();
    let top = bash_completes(&env, &["safe-lanes", ""]);
    for word in ["grant", "audit", "upload", "man"] {
        assert!(top.contains(&word.to_owned()), "{word}: {top:?}");
    }
    let grant = bash_completes(&env, &["safe-lanes", "grant", ""]);
    for word in ["add", "review", "approve", "revoke"] {
        assert!(grant.contains(&word.to_owned()), "{word}: {grant:?}");
    }
    assert!(
        !grant.iter().any(|w| w == "a-file-here"),
        "not files: {grant:?}"
    );
    let show = bash_completes(&env, &["safe-lanes", "audit", "show", "--"]);
    for flag in ["--refused", "--op", "--since", "--limit", "--follow"] {
        assert!(show.contains(&flag.to_owned()), "{flag}: {show:?}");
    }
    let roots = bash_completes(&env, &["safe-lanes", "upload", "roots", ""]);
    for word in ["add", "remove"] {
        assert!(roots.contains(&word.to_owned()), "{word}: {roots:?}");
    }
}

/// What zsh lists for `line` + Tab, with the script of `safe-lanes completions zsh` as the
/// completion function of `safe-lanes` (a real interactive zsh on a pseudo-terminal, `zpty`);
/// `expect` is a word the listing must show at the start of a line, read until it does.
fn zsh_lists(env: &Env, line: &str, expect: &str) -> String {
    let functions = env.tmp.path().join("zfunc");
    std::fs::create_dir_all(&functions).unwrap();
    std::fs::write(
        functions.join("_safe-lanes"),
        env.run(&["completions", "zsh"], b"").stdout,
    )
    .unwrap();
    let program = format!(
        r#"zmodload zsh/zpty
zpty -b z 'zsh -f -i'
zpty -w z 'PS1=">" ; fpath=({} $fpath); autoload -U compinit; compinit -u -D; setopt nobeep; zstyle ":completion:*" list-prompt ""'
zpty -w -n z $'{}\t'
zpty -r -m z listing "*"$'\n'"{}*"
print -r -- "$listing"
zpty -d z
"#,
        functions.display(),
        line,
        expect,
    );
    // `timeout`: a listing that never shows `expect` ends the test instead of hanging it.
    let out = Command::new("timeout")
        .args(["120", "zsh", "-f", "-c", &program])
        .env("HOME", env.home())
        .env("TERM", "dumb")
        .current_dir(env.cwd())
        .output()
        .expect("zsh runs");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn zsh_completes_commands_and_flags_below_the_top_level() {
    let env = Env::new();
    let grant = zsh_lists(&env, "safe-lanes grant ", "revoke");
    for word in ["add", "approve", "revoke", "review"] {
        assert!(grant.contains(word), "{word}: {grant}");
    }
    let show = zsh_lists(&env, "safe-lanes audit show --", "--since");
    for flag in ["--refused", "--since", "--follow"] {
        assert!(show.contains(flag), "{flag}: {show}");
    }
}

/// Regression: only the top-level page existed, and it referred to `safe-lanes-grant(1)` and
/// others that did not; no page had EXIT STATUS, FILES or ENVIRONMENT.
#[test]
fn one_manual_page_per_command_with_the_shared_sections() {
    let env = Env::new();
    let dir = env.tmp.path().join("man1");
    std::fs::create_dir(&dir).unwrap();
    let run = env.run(&["--json", "man", "--dir", dir.to_str().unwrap()], b"");
    assert_eq!(run.status, 0, "{run:?}");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    for page in [
        "safe-lanes.1",
        "safe-lanes-grant.1",
        "safe-lanes-grant-review.1",
        "safe-lanes-audit-show.1",
        "safe-lanes-upload-roots-add.1",
        "safe-lanes-man.1",
    ] {
        assert!(names.contains(&page.to_owned()), "{page}: {names:?}");
    }
    for name in &names {
        let page = std::fs::read_to_string(dir.join(name)).unwrap();
        assert!(page.starts_with(".TH "), "{name}");
        for section in [".SH \"EXIT STATUS\"", ".SH ENVIRONMENT", ".SH FILES"] {
            assert!(page.contains(section), "{name}: {section}");
        }
        // Every page it refers to is there.
        for reference in page.split("\\fB").skip(1) {
            if let Some((referred, rest)) = reference.split_once("\\fR")
                && rest.starts_with("(1)")
            {
                let file = format!("{}.1", referred.replace("\\-", "-"));
                assert!(names.contains(&file), "{name} refers to {file}");
            }
        }
    }
    let grant = env.run(&["man", "grant", "review"], b"");
    assert_eq!(grant.status, 0, "{grant:?}");
    assert!(
        grant.stdout.contains("safe\\-lanes\\-grant\\-review"),
        "{}",
        &grant.stdout[..200]
    );
    let none = env.run(&["--json", "man", "nothing"], b"");
    assert_eq!(
        (none.status, none.code()),
        (3, "invalid_argument".into()),
        "{none:?}"
    );
}
