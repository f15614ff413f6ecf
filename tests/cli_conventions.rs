//! The command line as users of its ecosystem expect it: every command's --help has examples and
//! exit codes, `dma --help` lists the engines, `--generate` prints completions (bash checks their
//! syntax) and a man page, `--quiet` silences notes, a bare block-device path is a `block:` target.

use assert_cmd::Command;
use predicates::prelude::*;

fn pcieperf() -> Command {
    Command::cargo_bin("pcieperf").unwrap()
}

#[test]
fn every_command_has_examples_and_exit_codes_in_its_help() {
    for command in ["model", "inspect", "dma", "demo", "run", "report", "serve", "crosscheck", "trace", "stream"] {
        pcieperf().args([command, "--help"]).assert().success().stdout(predicate::str::contains("Examples:").and(predicate::str::contains("Exit codes")));
    }
    pcieperf().arg("--help").assert().success().stdout(predicate::str::contains("Exit codes").and(predicate::str::contains("docs/sources.md")));
    let dma = pcieperf().args(["dma", "--help"]).assert().success().get_output().stdout.clone();
    let dma = String::from_utf8(dma).unwrap();
    for engine in ["  sim:", "  fault:", "  block:", "  xdma:", "  chardev:", "  xillybus:"] {
        assert!(dma.lines().any(|l| l.starts_with(engine)), "dma --help lists {engine} on its own line:\n{dma}");
    }
}

#[test]
fn completions_and_man_page() {
    let bash = pcieperf().args(["--generate", "complete-bash"]).assert().success().get_output().stdout.clone();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("pcieperf.bash");
    std::fs::write(&script, &bash).unwrap();
    let syntax = std::process::Command::new("bash").arg("-n").arg(&script).status().unwrap();
    assert!(syntax.success(), "the bash completion script has a syntax error");
    assert!(String::from_utf8(bash).unwrap().contains("--dump"));
    pcieperf().args(["--generate", "complete-zsh"]).assert().success().stdout(predicate::str::contains("#compdef pcieperf"));
    pcieperf().args(["--generate", "complete-fish"]).assert().success().stdout(predicate::str::contains("complete -c pcieperf"));
    pcieperf().args(["--generate", "man"]).assert().success().stdout(predicate::str::starts_with(".ie").and(predicate::str::contains(".TH pcieperf 1")).and(predicate::str::contains("inspect")));
    pcieperf().args(["--generate", "bogus"]).assert().code(2);
    pcieperf().args(["--generate", "man-bogus"]).assert().code(2);
    pcieperf().args(["--generate", "man-"]).assert().code(2);
}

/// Every page a man page refers to (`pcieperf\-dma(1)`) can be generated, and is that page.
#[test]
fn every_referenced_man_page_exists() {
    let page = |name: &str| -> String {
        let what = if name == "pcieperf" { "man".to_string() } else { format!("man-{}", name.trim_start_matches("pcieperf-")) };
        String::from_utf8(pcieperf().args(["--generate", &what]).assert().success().get_output().stdout.clone()).unwrap()
    };
    let mut seen = std::collections::BTreeSet::new();
    let mut todo = vec!["pcieperf".to_string()];
    while let Some(name) = todo.pop() {
        let roff = page(&name);
        assert!(roff.contains(&format!(".TH {name} 1")), "{name}: {}", &roff[..roff.len().min(200)]);
        seen.insert(name);
        for reference in roff.split("pcieperf\\-").skip(1) {
            let Some((rest, _)) = reference.split_once("(1)") else { continue };
            let referenced = format!("pcieperf-{}", rest.replace("\\-", "-"));
            if !seen.contains(&referenced) && !todo.contains(&referenced) {
                todo.push(referenced);
            }
        }
    }
    for expected in ["pcieperf-dma", "pcieperf-inspect", "pcieperf-model-fit", "pcieperf-serve"] {
        assert!(seen.contains(expected), "{expected} not reached from pcieperf(1): {seen:?}");
    }
}

#[test]
fn quiet_leaves_only_results_and_errors() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/gen3x8-nic-at-x4.lspci");
    pcieperf().args(["inspect", "-n", "-F", example]).assert().success().stderr(predicate::str::contains("note:"));
    pcieperf().args(["--quiet", "inspect", "-n", "-F", example]).assert().success().stderr("").stdout(predicate::str::contains("8086:1572"));
    pcieperf().args(["-q", "inspect", "-F", "/nonexistent"]).assert().code(2).stderr(predicate::str::contains("cannot read dump"));
    // Files written: no "written to" line with -q, one without.
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run.json");
    let dma = ["dma", "--target", "sim:doc001", "--sizes", "64KiB", "--duration", "20ms", "--out"];
    pcieperf().args(dma).arg(&run).assert().success().stderr(predicate::str::contains("written to"));
    pcieperf().arg("-q").args(dma).arg(&run).assert().success().stderr("");
    let html = dir.path().join("run.html");
    pcieperf().args(["-q", "report"]).arg(&run).arg("--html").arg(&html).assert().success().stderr("");
    pcieperf().args(["-q", "report"]).arg(&run).arg(&run).arg("--html").arg(&html).assert().success().stderr("");
    pcieperf().args(["report"]).arg(&run).arg("--html").arg(&html).assert().success().stderr(predicate::str::contains("written to"));
}

#[test]
fn a_block_device_path_is_a_block_target() {
    pcieperf()
        .args(["dma", "--target", "/dev/nvme-does-not-exist", "--sizes", "1MiB"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("read as block:/dev/nvme-does-not-exist"));
}
