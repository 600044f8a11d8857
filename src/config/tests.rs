//! The config file's parsing and checks.

use super::*;

#[test]
fn read_only_tools_match_every_naming_style() {
    let c = AfterSuccessConfig::default();
    for tool in [
        "get_weather",
        "getWeather",
        "get-weather",
        "mcp__github__get_issue",
        "search_flights",
        "fetch_page",
    ] {
        assert!(c.read_only(tool), "{tool}");
    }
    for tool in [
        "book_flight",
        "bookFlight",
        "charge_card",
        "bash",
        "forget_user",
    ] {
        assert!(!c.read_only(tool), "{tool}");
    }
}

#[test]
fn empty_file_is_the_defaults() {
    assert_eq!(
        Config::parse("", Path::new("x.toml")).unwrap(),
        Config::default()
    );
}

#[test]
fn unknown_price_keys_are_refused() {
    let bad = "[cost.models.\"gpt-4o\"]\ninput_per_mtok = 2.5\noutput_per_mtok = 10.0\ncached_per_mtok = 1.0\n";
    let e = Config::parse(bad, std::path::Path::new("t.toml")).unwrap_err();
    assert!(e.to_string().contains("cached_per_mtok"), "{e}");
    let e = Config::parse("[cost]\nprices = 1\n", std::path::Path::new("t.toml")).unwrap_err();
    assert!(e.to_string().contains("prices"), "{e}");
    let e = Config::parse(
        "[cost.models.m]\ninput_per_mtok = -1\noutput_per_mtok = 1\n",
        std::path::Path::new("t.toml"),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("cost.models.\"m\".input_per_mtok"),
        "{e}"
    );
    let ok = Config::parse(
        "[cost.models.\"gpt-4o\"]\ninput_per_mtok = 2.5\noutput_per_mtok = 10.0\n",
        std::path::Path::new("t.toml"),
    )
    .expect("valid");
    assert_eq!(ok.detect.cost, ok.cost);
    assert_eq!(ok.cost.models["gpt-4o"].output_per_mtok, 10.0);
}

#[test]
fn unknown_key_is_named() {
    let err = Config::parse("[store]\nretention_dayz = 3\n", Path::new("x.toml")).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("retention_dayz"), "{msg}");
    assert!(msg.contains("x.toml"), "{msg}");
}

#[test]
fn result_shapes_are_read_and_checked_naming_the_key() {
    let ok = "[[ingest.result_failures]]\npointer = \"/outcome/state\"\nequals = [\"FAILED\"]\nmessage = \"/outcome/reason\"\ntools = [\"book_*\"]\n";
    let c = Config::parse(ok, Path::new("x.toml")).unwrap();
    assert_eq!(c.ingest.result_failures.len(), 1);
    let shapes = c.store_options(None).result_shapes;
    assert_eq!(shapes.0[0].pointer, "/outcome/state");
    let bad = "[[ingest.result_failures]]\npointer = \"outcome\"\n";
    let err = Config::parse(bad, Path::new("x.toml"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("ingest.result_failures[0].pointer"), "{err}");
    assert!(err.contains("\"outcome\""), "what came: {err}");
    let unknown = "[[ingest.result_failures]]\npointer = \"/s\"\nequal = [\"x\"]\n";
    let err = Config::parse(unknown, Path::new("x.toml"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("equal"), "{err}");
}

#[test]
fn wrong_type_says_what_was_expected() {
    let err =
        Config::parse("[ingest]\nmax_body_bytes = \"big\"\n", Path::new("x.toml")).unwrap_err();
    assert!(err.to_string().contains("max_body_bytes"), "{err}");
}

/// The README's config reference is `config default`'s file, and that
/// file is the real defaults, key for key.
#[test]
fn the_default_file_is_the_built_in_defaults_and_the_readme_shows_it() {
    let readme = include_str!("../../README.md");
    let start = readme
        .find("The defaults:\n\n```toml\n")
        .expect("README has the defaults block");
    let block = &readme[start..];
    let body = &block[block.find("```toml\n").unwrap() + 8..];
    let body = &body[..body.find("```").unwrap()];
    assert_eq!(
        body, DEFAULT_FILE,
        "README block differs from src/config/default.toml"
    );
    let parsed = Config::parse(DEFAULT_FILE, Path::new("default.toml")).unwrap();
    assert_eq!(parsed, Config::default());
    // Every key the program has is spelled out, so none can hide.
    fn leaves(prefix: &str, v: &toml::Value, out: &mut Vec<String>) {
        match v {
            toml::Value::Table(t) => {
                for (k, v) in t {
                    leaves(&format!("{prefix}{k}."), v, out);
                }
            }
            _ => out.push(prefix.trim_end_matches('.').to_string()),
        }
    }
    let (mut written, mut built_in) = (Vec::new(), Vec::new());
    leaves(
        "",
        &DEFAULT_FILE.parse::<toml::Table>().unwrap().into(),
        &mut written,
    );
    leaves(
        "",
        &toml::Value::try_from(Config::default()).unwrap(),
        &mut built_in,
    );
    written.sort();
    built_in.sort();
    assert_eq!(written, built_in);
}

#[test]
fn detection_thresholds_are_checked() {
    for (text, key) in [
        ("[detect.error_spike]\nmultiplier = 0.0\n", "multiplier"),
        ("[detect.error_spike]\nconfidence = 1.5\n", "confidence"),
        (
            "[detect.error_spike]\nbaseline_days = 30\n",
            "reach_back_days",
        ),
        ("[detect.error_spike]\nmin_call = 3\n", "min_call"),
    ] {
        let err = Config::parse(text, Path::new("x.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(key), "{text}: {err}");
    }
    let c = Config::parse(
        "[detect.error_spike]\nmultiplier = 4.0\n",
        Path::new("x.toml"),
    )
    .unwrap();
    assert_eq!(c.detect.error_spike.multiplier, 4.0);
    assert_eq!(c.detect.error_spike.min_calls, 10);
}

#[test]
fn import_caps_are_checked_and_reach_the_limits() {
    let err = Config::parse("[import]\nmax_file_bytes = 10\n", Path::new("x.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("import.max_file_bytes: must be at least 1024"),
        "{err}"
    );
    let c = Config::parse("[import]\nmax_file_bytes = 4096\n", Path::new("x.toml")).unwrap();
    let limits = c.import.limits();
    assert_eq!(limits.max_file_bytes, 4096);
    assert_eq!(limits.max_decompressed_bytes, 1 << 30);
}

#[test]
fn silent_params_are_range_checked() {
    let err = Config::parse("[detect.silent]\nmax_ratio = 1.5\n", Path::new("x.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("detect.silent.max_ratio: must be a share from 0 to below 1, got 1.5"),
        "{err}"
    );
}

#[test]
fn retention_zero_keeps_everything_and_flag_wins() {
    let c = Config::parse("[store]\nretention_days = 0\n", Path::new("x.toml")).unwrap();
    assert_eq!(c.store_options(None).retention_days, None);
    assert_eq!(c.store_options(Some(7)).retention_days, Some(7));
}
