//! Fuzzing with proptest: arbitrary bytes and text never panic the dump parser, the capability
//! walks or the whole inspection, and every walk terminates within the space it walks.

use proptest::prelude::*;

use pcieperf::pci::config::ConfigSpace;
use pcieperf::pci::{dump, walk, Bdf, Device, InspectOptions, Source};

fn config_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..=4096),
        // Plausible headers: capability list present, pointers into the space.
        (proptest::collection::vec(any::<u8>(), 4096), any::<u8>()).prop_map(|(mut b, ptr)| {
            b[6] |= 0x10;
            b[0x34] = ptr | 0x40;
            b
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn walks_terminate_and_stay_in_bounds(bytes in config_bytes()) {
        let config = ConfigSpace::new(bytes);
        let standard = walk::standard(&config);
        // Pointers into the header are followed, as lspci follows them: each dword at most once.
        prop_assert!(standard.caps.len() <= 0x100 / 4, "one capability per dword of the first 256 bytes");
        prop_assert!(standard.caps.iter().all(|c| c.offset + 4 <= config.len().min(0x100)));
        let extended = walk::extended(&config);
        prop_assert!(extended.caps.len() <= 0x1000 / 4);
        prop_assert!(extended.caps.iter().all(|c| c.offset + 4 <= config.len()));
    }

    #[test]
    fn decoding_arbitrary_bytes_never_panics(bytes in config_bytes(), function in 0u8..8) {
        let bdf = Bdf::new(0, 1, 0, function).unwrap();
        let device = Device::decode(bdf, ConfigSpace::new(bytes), None, None, Vec::new());
        let _ = (device.link_status(), device.link_capable(), device.bars(), device.unavailable(false));
    }

    #[test]
    fn dump_parser_never_panics_on_text(text in "\\PC{0,400}") {
        let _ = dump::parse(&text);
    }

    #[test]
    fn dump_parser_never_panics_on_dump_like_lines(lines in proptest::collection::vec(
        prop_oneof![
            "[0-9a-f]{2}:[0-9a-f]{2}\\.[0-9] [a-z ]{0,8}",
            "[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-9a-z]",
            "[0-9a-f]{1,4}:( [0-9a-fz]{1,3}){0,17}",
            "\t[A-Za-z: ]{0,12}",
            Just(String::new()),
        ], 0..300)) {
        let _ = dump::parse(&lines.join("\n"));
    }

    #[test]
    fn whole_inspection_of_random_dumps_never_panics(configs in proptest::collection::vec(config_bytes(), 1..6)) {
        let devices: Vec<(Bdf, Vec<u8>)> = configs
            .into_iter()
            .enumerate()
            .map(|(i, mut bytes)| {
                // Dumps hold 64, 128, 256 or 4096 bytes.
                let len = [64, 128, 256, 4096].into_iter().rev().find(|&l| l <= bytes.len()).unwrap_or(64);
                bytes.resize(len, 0);
                (Bdf::new(0, i as u8, 0, 0).unwrap(), bytes)
            })
            .collect();
        let refs: Vec<(Bdf, &[u8])> = devices.iter().map(|(b, c)| (*b, c.as_slice())).collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fuzz.dump");
        std::fs::write(&path, dump::write(&refs)).unwrap();
        let options = InspectOptions { source: Source::Dump(path), pci_ids: Some("/nonexistent".into()), selector: None, ids: None };
        let reports = pcieperf::pci::inspect_machine(&options).unwrap();
        prop_assert_eq!(reports.len(), devices.len());
        for report in &reports {
            let _ = pcieperf::pci::report::render_verbose(report, pcieperf::pci::report::Style { verbose: 3, ..Default::default() });
            serde_json::to_string(report).unwrap();
        }
    }
}
