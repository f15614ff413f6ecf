//! What `deploy/` ships, checked by the tools that will read it: the alert rules by
//! `promtool check rules` and their unit tests by `promtool test rules`, the scrape snippet by
//! `promtool check config`, the systemd unit by `systemd-analyze verify`, the Grafana dashboard's
//! structure here (its queries run against a real Prometheus in tests/serve_prometheus.rs).
//! A missing tool is named as skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "data/dashboard.rs"]
mod dashboard;
use dashboard::dashboard_queries;

fn deploy(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy").join(path)
}

/// Run a tool; `None` when it is not installed.
fn tool(program: &str, args: &[&str], dir: &Path) -> Option<std::process::Output> {
    match Command::new(program).args(args).current_dir(dir).output() {
        Ok(out) => Some(out),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("skipped: {program} not installed (.ci/run installs it)");
            None
        }
        Err(e) => panic!("{program}: {e}"),
    }
}

fn assert_success(what: &str, out: &std::process::Output) {
    assert!(out.status.success(), "{what}:\n{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

#[test]
fn alert_rules_pass_promtool_check_and_their_unit_tests() {
    let dir = deploy("prometheus");
    let Some(check) = tool("promtool", &["check", "rules", "pcieperf-alerts.yml"], &dir) else { return };
    assert_success("promtool check rules", &check);
    assert!(String::from_utf8_lossy(&check.stdout).contains("SUCCESS: 7 rules found"), "{}", String::from_utf8_lossy(&check.stdout));
    let test = tool("promtool", &["test", "rules", "pcieperf-alerts.test.yml"], &dir).unwrap();
    assert_success("promtool test rules", &test);
}

/// The unit tests can fail: the same tests against a rule whose threshold was moved.
#[test]
fn the_rule_unit_tests_catch_a_wrong_threshold() {
    let dir = tempfile::tempdir().unwrap();
    let rules = std::fs::read_to_string(deploy("prometheus/pcieperf-alerts.yml")).unwrap();
    assert!(rules.contains("< 0.5"));
    std::fs::write(dir.path().join("pcieperf-alerts.yml"), rules.replace("< 0.5", "< 0.2")).unwrap();
    std::fs::copy(deploy("prometheus/pcieperf-alerts.test.yml"), dir.path().join("pcieperf-alerts.test.yml")).unwrap();
    let Some(out) = tool("promtool", &["test", "rules", "pcieperf-alerts.test.yml"], dir.path()) else { return };
    assert!(!out.status.success(), "a ceiling alert at 20 % must fail the 30 % test case");
    assert!(String::from_utf8_lossy(&out.stdout).contains("PcieperfResultBelowCeiling") || String::from_utf8_lossy(&out.stderr).contains("PcieperfResultBelowCeiling"));
}

#[test]
fn the_scrape_snippet_is_a_valid_prometheus_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let snippet = std::fs::read_to_string(deploy("prometheus/scrape.yml")).unwrap();
    // Its rule_files path is where an installation puts the rules; here, the repository's copy.
    let rules = deploy("prometheus/pcieperf-alerts.yml");
    let config = snippet.replace("/etc/prometheus/pcieperf-alerts.yml", rules.to_str().unwrap());
    assert_ne!(config, snippet, "the snippet loads the alert rules");
    std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
    let Some(out) = tool("promtool", &["check", "config", "prometheus.yml"], dir.path()) else { return };
    assert_success("promtool check config", &out);
}

#[test]
fn the_systemd_unit_verifies_cleanly() {
    let unit = std::fs::read_to_string(deploy("systemd/pcieperf-exporter.service")).unwrap();
    assert!(unit.contains("ExecStart=/usr/local/bin/pcieperf serve --listen 127.0.0.1:9750"), "{unit}");
    let scrape = std::fs::read_to_string(deploy("prometheus/scrape.yml")).unwrap();
    assert!(scrape.contains("127.0.0.1:9750"), "the snippet scrapes where the unit listens");
    // systemd-analyze checks that ExecStart exists: point it at the binary under test.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pcieperf-exporter.service");
    std::fs::write(&path, unit.replace("/usr/local/bin/pcieperf", env!("CARGO_BIN_EXE_pcieperf"))).unwrap();
    let Some(out) = tool("systemd-analyze", &["verify", path.to_str().unwrap()], dir.path()) else { return };
    assert_success("systemd-analyze verify", &out);
    // Unknown keys and bad values are warnings with exit 0: none allowed.
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_dashboard_is_well_formed_and_uses_only_documented_series() {
    let d = dashboard::dashboard();
    assert!(d["uid"].is_string() && d["title"].is_string() && d["schemaVersion"].as_u64().unwrap() >= 36);
    let variables: Vec<&str> = d["templating"]["list"].as_array().unwrap().iter().map(|v| v["name"].as_str().unwrap()).collect();
    assert_eq!(variables, ["datasource", "instance"]);
    let docs = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/metrics.md")).unwrap();
    let mut ids = std::collections::BTreeSet::new();
    for panel in d["panels"].as_array().unwrap() {
        let title = panel["title"].as_str().unwrap();
        assert!(ids.insert(panel["id"].as_u64().unwrap()), "{title}: duplicate id");
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{title}");
        let g = &panel["gridPos"];
        assert!(g["x"].as_u64().unwrap() + g["w"].as_u64().unwrap() <= 24 && g["h"].as_u64().unwrap() > 0, "{title}: {g}");
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{title}: no query");
        for target in targets {
            let expr = target["expr"].as_str().unwrap();
            assert!(expr.contains("instance=~\"$instance\""), "{title}: {expr} ignores the host variable");
            for name in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| w.starts_with("pcieperf_")) {
                assert!(docs.contains(&format!("`{name}`")), "{title}: {name} is not in docs/metrics.md");
            }
        }
    }
    assert!(dashboard_queries(&d).len() >= 10);
}
