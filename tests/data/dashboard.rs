//! The Grafana dashboard shipped in deploy/grafana, as the tests read it.

use std::path::Path;

/// The dashboard's JSON.
pub fn dashboard() -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/grafana/pcieperf-dashboard.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Every expression a panel runs, with its panel's title, the `$instance` variable set to
/// every host (the variable's "All" value).
pub fn dashboard_queries(dashboard: &serde_json::Value) -> Vec<(String, String)> {
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap().replace("$instance", ".+");
            queries.push((panel["title"].as_str().unwrap().to_string(), expr));
        }
    }
    queries
}
