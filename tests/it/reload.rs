//! Config reload through a Kubernetes-style symlink swap: a good config
//! changes the rules without a restart; a bad one, or a file that cannot be
//! read, keeps the old policy.

use crate::common::{failure, http_get, Log, Sidecar};
use rebound::pb;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::Duration;

/// Lays out a directory the way the kubelet does for a ConfigMap volume:
/// `rebound.toml -> ..data/rebound.toml`, `..data -> ..<version>`.
fn publish(dir: &Path, version: &str, content: &str) {
    let versioned = dir.join(format!("..{version}"));
    std::fs::create_dir_all(&versioned).unwrap();
    std::fs::write(versioned.join("rebound.toml"), content).unwrap();
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    symlink(format!("..{version}"), &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    if !dir.join("rebound.toml").exists() {
        symlink("..data/rebound.toml", dir.join("rebound.toml")).unwrap();
    }
}

async fn category_of(client: &mut pb::rebound_client::ReboundClient<tonic::transport::Channel>, session: &str) -> i32 {
    let v = client.report(failure(session, "t", "the frobnicator declined")).await.unwrap().into_inner();
    v.classification.unwrap().category
}

/// Waits up to 10 s for `rebound_config_last_reload_successful` to read `value`.
async fn last_reload_successful_is(sidecar: &Sidecar, value: u32) -> bool {
    let line = format!("rebound_config_last_reload_successful {value}");
    for _ in 0..40 {
        let body = http_get(&sidecar.metrics, "/metrics").await;
        if body.lines().any(|l| l == line) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    false
}

/// Waits up to 10 s for the sidecar to count `count` failed reloads.
async fn failed_reloads_reach(sidecar: &Sidecar, count: u32) -> bool {
    reloads_reach(sidecar, "error", count).await
}

/// Waits up to 10 s for the sidecar to count `count` reloads with `result`.
async fn reloads_reach(sidecar: &Sidecar, result: &str, count: u32) -> bool {
    let line = format!("rebound_config_reloads_total{{result=\"{result}\"}} {count}");
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let body = http_get(&sidecar.metrics, "/metrics").await;
        if body.lines().any(|l| l.starts_with(&line)) {
            return true;
        }
    }
    false
}

/// The log lines that contain `text`, once there are `count` of them (waiting up to 10 s: the log
/// comes through a pipe), or those there are by then.
async fn logged(log: &Log, text: &str, count: usize) -> Vec<String> {
    let lines = || log.lock().unwrap().iter().filter(|l| l.contains(text)).cloned().collect::<Vec<_>>();
    for _ in 0..100 {
        if lines().len() >= count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    lines()
}

/// The count of reloads with `result` now.
async fn reload_count(sidecar: &Sidecar, result: &str) -> u64 {
    let line = format!("rebound_config_reloads_total{{result=\"{result}\"}} ");
    let body = http_get(&sidecar.metrics, "/metrics").await;
    let count = body.lines().find_map(|l| l.strip_prefix(&line));
    count.unwrap_or_else(|| panic!("no {line}in {body}")).parse().unwrap()
}

#[tokio::test]
async fn configmap_swap_reloads_and_a_bad_config_keeps_the_old_policy() {
    let dir = tempfile::tempdir().unwrap();
    publish(dir.path(), "v1", "# nothing yet\n");
    let config = dir.path().join("rebound.toml");
    let sidecar = Sidecar::spawn(&["--config", config.to_str().unwrap()]);
    let channel = crate::common::connect(&sidecar.grpc).await;
    let mut client = pb::rebound_client::ReboundClient::new(channel);
    assert_eq!(category_of(&mut client, "r0").await, pb::Category::Unknown as i32);
    assert!(last_reload_successful_is(&sidecar, 1).await, "started with a config that loads");

    publish(
        dir.path(),
        "v2",
        "[[rules]]\nid = \"acme.frobnicator\"\nmessage = [\"frobnicator declined\"]\ncategory = \"unavailable\"\n",
    );
    let mut reloaded = false;
    for i in 0..40 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        if category_of(&mut client, &format!("r1-{i}")).await == pb::Category::Unavailable as i32 {
            reloaded = true;
            break;
        }
    }
    assert!(reloaded, "the new rule never took effect");

    publish(dir.path(), "v3", "[[rules]]\nid = \"broken\"\nmessage = [\"(unclosed\"]\ncategory = \"timeout\"\n");
    assert!(failed_reloads_reach(&sidecar, 1).await, "the failed reload was not counted");
    assert_eq!(category_of(&mut client, "r2").await, pb::Category::Unavailable as i32, "old policy kept");

    // A good rule in a file past the 16 MiB a config may be: refused too, not read on and on.
    let long = "[[rules]]\nid = \"acme.frobnicator\"\nmessage = [\"frobnicator declined\"]\ncategory = \"timeout\"\n";
    publish(dir.path(), "v4", &format!("{long}{}", "\n".repeat(16 << 20)));
    assert!(failed_reloads_reach(&sidecar, 2).await, "the reload of a file past the limit was not refused");
    assert_eq!(category_of(&mut client, "r3").await, pb::Category::Unavailable as i32, "old policy kept");
    // Still 0 while the bad file stays (ReboundConfigReloadFailed holds on it), 1 once a good one loads.
    assert!(last_reload_successful_is(&sidecar, 0).await, "the failed reloads left the gauge at 1");
    publish(dir.path(), "v5", "# good again\n");
    assert!(reloads_reach(&sidecar, "ok", 2).await, "the good config was not loaded");
    assert!(last_reload_successful_is(&sidecar, 1).await, "the good reload left the gauge at 0");
}

#[tokio::test]
async fn a_reload_warns_of_the_settings_only_a_restart_applies_and_of_no_others() {
    let dir = tempfile::tempdir().unwrap();
    publish(dir.path(), "v1", "# nothing yet\n");
    let config = dir.path().join("rebound.toml");
    // Started with --listen and --metrics-listen flags, which the file does not repeat, as the manifests do.
    let (sidecar, log) = Sidecar::spawn_logged(&["--config", config.to_str().unwrap()]);
    let warnings =
        || log.lock().unwrap().iter().filter(|l| l.contains("only after a restart")).cloned().collect::<Vec<_>>();

    let rule =
        "[[rules]]\nid = \"acme.frobnicator\"\nmessage = [\"frobnicator declined\"]\ncategory = \"unavailable\"\n";
    publish(dir.path(), "v2", rule);
    assert!(reloads_reach(&sidecar, "ok", 1).await, "the new rule was not loaded");
    publish(dir.path(), "v3", &format!("{rule}[state]\nsync_interval_ms = 1000\n"));
    assert!(reloads_reach(&sidecar, "ok", 2).await, "the [state] change was not loaded");
    // The log comes through a pipe: wait for a warning. One from v2 would come before v3's.
    for _ in 0..100 {
        if !warnings().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The flags used to be taken for a change to [server] at every reload, and [state] went unsaid.
    let warned = warnings();
    assert_eq!(warned.len(), 1, "{warned:?}");
    let expected = "WARN rebound::sidecar: changes that take effect only after a restart settings=[state]";
    assert!(warned[0].ends_with(expected), "{warned:?}");
}

#[tokio::test]
async fn a_failed_reload_is_logged_on_one_line_that_names_the_key() {
    let dir = tempfile::tempdir().unwrap();
    publish(dir.path(), "v1", "# nothing yet\n");
    let config = dir.path().join("rebound.toml");
    let (sidecar, log) = Sidecar::spawn_logged(&["--config", config.to_str().unwrap()]);
    publish(dir.path(), "v2", "[retry]\nbsae_ms = 500\n");
    assert!(failed_reloads_reach(&sidecar, 1).await, "the misspelt key was not refused");
    // toml's message takes five lines; the key comes on the last, which `grep` used to leave out.
    let failed = logged(&log, "config reload failed", 1).await;
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].contains("TOML parse error at line 2, column 1 | "), "{failed:?}");
    assert!(failed[0].contains("unknown field `bsae_ms`, expected one of `base_ms`"), "{failed:?}");
}

#[tokio::test]
async fn a_config_file_that_cannot_be_read_fails_the_reload_until_it_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let rule =
        "[[rules]]\nid = \"acme.frobnicator\"\nmessage = [\"frobnicator declined\"]\ncategory = \"unavailable\"\n";
    publish(dir.path(), "v1", rule);
    let config = dir.path().join("rebound.toml");
    let (sidecar, log) = Sidecar::spawn_logged(&["--config", config.to_str().unwrap()]);
    let channel = crate::common::connect(&sidecar.grpc).await;
    let mut client = pb::rebound_client::ReboundClient::new(channel);

    // A ConfigMap version without the key: the kubelet removes the file's symlink. The old policy
    // runs on, but a restart would not start, and that used to go unsaid.
    std::fs::remove_file(&config).unwrap();
    assert!(failed_reloads_reach(&sidecar, 1).await, "the missing file was not counted");
    assert!(last_reload_successful_is(&sidecar, 0).await, "the missing file left the gauge at 1");
    assert_eq!(category_of(&mut client, "r1").await, pb::Category::Unavailable as i32, "old policy kept");
    // Counted once while it lasts, not at each poll (every 2 s).
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(reload_count(&sidecar, "error").await, 1);
    // A directory in its place: another error, counted and logged too.
    std::fs::create_dir(&config).unwrap();
    assert!(failed_reloads_reach(&sidecar, 2).await, "the directory was not counted");
    let failed = logged(&log, "config reload failed", 2).await;
    assert_eq!(failed.len(), 2, "{failed:?}");
    let path = format!("path={}", config.display());
    assert!(failed[0].contains(&path) && failed[0].contains("No such file or directory"), "{failed:?}");
    assert!(failed[1].contains(&path) && failed[1].contains("Is a directory"), "{failed:?}");

    // Back as it was: loaded again, and the gauge says the file's config is the one in use.
    std::fs::remove_dir(&config).unwrap();
    symlink("..data/rebound.toml", &config).unwrap();
    assert!(reloads_reach(&sidecar, "ok", 1).await, "the file back was not loaded");
    assert!(last_reload_successful_is(&sidecar, 1).await, "the file back left the gauge at 0");
    assert_eq!(category_of(&mut client, "r2").await, pb::Category::Unavailable as i32);
    // Each error counted and logged once.
    assert_eq!(reload_count(&sidecar, "error").await, 2);
    assert_eq!(log.lock().unwrap().iter().filter(|l| l.contains("config reload failed")).count(), 2);
}

#[tokio::test]
async fn sighup_is_logged_and_the_sidecar_serves_on() {
    // Unhandled, SIGHUP ended the sidecar without a log line (exit status 129).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rebound.toml");
    std::fs::write(&path, "").unwrap();
    let mut command = Sidecar::command(&["--config", path.to_str().unwrap()]);
    command.env("RUST_LOG", "info");
    let (mut sidecar, log) = Sidecar::start_logged(command);
    sidecar.signal("HUP");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !log.lock().unwrap().iter().any(|l| l.contains("SIGHUP: nothing to do")) {
        assert!(std::time::Instant::now() < deadline, "{:?}", log.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(sidecar.child.try_wait().unwrap().is_none(), "the sidecar ended");
    let mut client = pb::rebound_client::ReboundClient::new(crate::common::connect(&sidecar.grpc).await);
    let verdict = client.report(failure("after-hup", "search", "timed out")).await.unwrap().into_inner();
    assert_ne!(verdict.action, pb::Action::Unspecified as i32);
}
