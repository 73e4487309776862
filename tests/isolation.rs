//! The isolation reference: a type's power measured directly where it ran alone (its own
//! calibration), beside the fit made from the whole trace, on the simulated meter whose
//! truth is known (emulated GPU: its NVML-like domain).

mod common;

use common::{ok, s};

#[test]
fn a_type_measured_alone_agrees_with_the_fit_and_the_truth() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("iso.twt");
    ok(&[
        "run",
        "cholesky",
        "--n",
        "1024",
        "--tile",
        "128",
        "--workers",
        "1",
        "--gpus",
        "1",
        "--sched",
        "dmda",
        "--idle-calibration",
        "1s",
        "--type-calibration",
        "1s",
        "--no-perfmodel",
        "--no-report",
        "--trace",
        s(&trace),
    ]);
    let v: serde_json::Value = serde_json::from_str(&ok(&["report", s(&trace), "--json"])).unwrap();
    let gpu = v["report"]["domains"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"].as_str().unwrap().contains("GPU"))
        .expect("the emulated GPU's simulated domain");
    let truth = |name: &str| {
        gpu["truth"]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .and_then(|r| r["truth_w"].as_f64())
    };
    let mut checked = 0;
    for r in gpu["regions"].as_array().unwrap() {
        let Some(a) = r.get("alone").filter(|a| !a.is_null()) else {
            continue;
        };
        let name = format!(
            "{}@{}",
            a["key"]["codelet"].as_str().unwrap(),
            a["key"]["arch"].as_str().unwrap()
        );
        let (m, f) = (
            a["measured_w"].as_f64().unwrap(),
            a["fitted_w"].as_f64().unwrap(),
        );
        assert!(
            ((f - m) / m).abs() < 0.05,
            "{name}: fitted {f} W, alone {m} W"
        );
        let t = truth(&name).expect("a simulated type has its truth");
        assert!(
            ((m - t) / t).abs() < 0.05,
            "{name}: alone {m} W, truth {t} W"
        );
        checked += 1;
    }
    // gemm, syrk and trsm have GPU implementations, each calibrated alone.
    assert_eq!(checked, 3, "{}", gpu["regions"]);
}
