//! What a machine can honour and what the pipeline declared: parameter values beyond a
//! stage's limits or the `budget` are usage errors (exit 2) naming the parameter, as the
//! literals are compile errors; and the CLI's own defects of item [1/7] 12 and 14 (one exit
//! status and message for a `.pipe` that is not UTF-8; a full standard output said once).

use std::process::Stdio;

use crate::support::{generate, pipes_and_tabular, sluice_command, sluice_in, stderr, text};

const LIMITED: &str = r#"
pipeline limited(files: glob, c: u32 = 2, buf: u64 = 100) {
    budget 64 MiB;
    tfrecords(files, cycle: c);
    shuffle(buf, seed: 1);
}

pipeline windows(size: u64 = 4, p: u32 = 2) {
    budget 64 MiB;
    range(0, 100);
    map(parallel: p) { value = value * 2; }
    window(size, shift: 1);
}
"#;

/// `--set c=65537` for a `cycle: c` was exit 1 from inside the interleave, naming no
/// parameter; `p=4294967295` for a map's `parallel` started threads until the machine
/// gave out; `buf=1000000000` (or a window's `size`) under `budget 64 MiB` ran past 1.5 GB
/// although the same literal is E0500. Each is now exit 2 naming the parameter, its
/// value and the limit, before anything runs; values within them run.
#[test]
fn parameter_values_beyond_the_limits_or_the_budget_are_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let (file, files) = pipes_and_tabular(dir.path(), LIMITED, 40);
    let file = file.to_str().unwrap();
    let ok = sluice_in(dir.path(), &["run", file, "limited", "--set", &files, "--set", "buf=200", "--json"]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    for (pipeline, set, message) in [
        (
            "limited",
            "c=65537",
            "parameter `c` is 65537: the `cycle` of `interleave` it sets must be at most 65536",
        ),
        (
            "windows",
            "p=4294967295",
            "parameter `p` is 4294967295: the `parallel` of `map` it sets must be at most 4096",
        ),
        ("limited", "buf=1000000000", "parameter `buf` = 1000000000: the pipeline may then hold "),
        ("windows", "size=1000000000", "parameter `size` = 1000000000: the pipeline may then hold "),
    ] {
        let mut args = vec!["run", file, pipeline, "--set", set];
        if pipeline == "limited" {
            args.extend(["--set", &files]);
        }
        let o = sluice_in(dir.path(), &args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{set}: {err}");
        assert!(err.contains(&format!("error: pipeline `{pipeline}`: {message}")), "{set}: {err}");
        if message.ends_with("may then hold ") {
            assert!(err.contains("more than its `budget` of 64.0 MiB"), "{set}: {err}");
        }
    }
}

/// A `.pipe` that is not UTF-8 is one failure for every command that reads one: exit 1
/// and the same message (`explain` said exit 2, the others exit 1).
#[test]
fn a_pipe_file_that_is_not_utf8_is_exit_1_with_one_message_for_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("bin.pipe");
    std::fs::write(&binary, [b'p', 0xff, 0xfe, b'\n']).unwrap();
    let binary = binary.to_str().unwrap();
    let want = format!("error: {binary}: not valid UTF-8 (first bad byte at offset 1)\n");
    for command in ["check", "explain", "emit", "run", "show"] {
        let o = sluice_in(dir.path(), &[command, binary]);
        assert_eq!(o.status.code(), Some(1), "{command}: {}", text(&o.stderr));
        assert_eq!(text(&o.stderr), want, "{command}");
    }
}

/// Output to a full disk is said once (`index`, `index --check` and `bench read` said
/// "cannot write to standard output" twice: the failed line was still buffered when
/// the exit flushed standard output).
#[test]
fn a_full_standard_output_is_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    generate("tabular", 20, 1, &data, &[]);
    let d = data.to_str().unwrap();
    let o = sluice_in(dir.path(), &["index", d]);
    assert!(o.status.success(), "{}", stderr(&o));
    for args in [&["index", d][..], &["index", "--check", d], &["bench", "read", d]] {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full");
        let o = sluice_command(dir.path())
            .args(args)
            .stdout(Stdio::from(full))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.matches("cannot write to standard output").count(), 1, "{args:?}: {err}");
    }
}
