//! Snippet templates and token budgets through the real server.

use crate::common::{failure, TestServer};
use rebound::config::Config;
use rebound::pb;

#[tokio::test]
async fn a_custom_template_from_the_config_changes_the_snippet() {
    let config = Config::parse(
        r#"
[snippet.templates]
error_block = "[{{ type }}] {{ tool }} failed: {{ message }}{% if suggestion %} (hint: {{ suggestion }}){% endif %}"
instruction = "NEXT({{ action }}): {{ nudge }}{% if advice %} {{ advice }}{% endif %}"
"#,
        "test",
    )
    .unwrap();
    let mut server = TestServer::start_with(config).await;
    let v = server
        .client
        .report(pb::Outcome { http_status: 404, ..failure("tpl", "fetch", "404 Client Error: Not Found") })
        .await
        .unwrap()
        .into_inner();
    assert!(v.snippet.starts_with("[not_found] fetch failed: 404 Client Error: Not Found (hint: "), "{}", v.snippet);
    assert!(
        v.snippet.ends_with("NEXT(recover): Please analyze what went wrong and try a different approach."),
        "{}",
        v.snippet
    );
    server.stop().await;
}

#[test]
fn a_template_with_an_unknown_variable_is_refused_at_load() {
    let config = Config::parse("[snippet.templates]\nerror_block = \"{{ tool }} {{ stack }}\"\n", "t").unwrap();
    let err = rebound::policy::Policy::from_config(&config).unwrap_err().to_string();
    assert!(err.contains("error_block") && err.contains("`stack`"), "{err}");
}

#[tokio::test]
async fn token_budgets_shorten_snippets_and_drop_the_oldest_context() {
    let mut config = Config::default();
    config.snippet.max_tokens = 60;
    config.snippet.context_errors = 10;
    config.breakers.session_errors = 100;
    let mut server = TestServer::start_with(config).await;
    let long = "the upstream inventory service returned an error while listing warehouse stock levels ".repeat(8);
    let mut last = None;
    for i in 0..6 {
        let o = pb::Outcome { http_status: 404, ..failure("budget", &format!("tool{i}"), &long) };
        last = Some(server.client.report(o).await.unwrap().into_inner());
    }
    let v = last.unwrap();
    assert!(v.snippet_tokens > 0 && v.snippet_tokens <= 60, "{} tokens: {}", v.snippet_tokens, v.snippet);
    let all = server
        .client
        .context(pb::ContextRequest { session_id: "budget".into(), max_tokens: 0 })
        .await
        .unwrap()
        .into_inner();
    let fitted = server
        .client
        .context(pb::ContextRequest { session_id: "budget".into(), max_tokens: 150 })
        .await
        .unwrap()
        .into_inner();
    assert!(fitted.tokens <= 150 || fitted.errors_shown == 1, "{} tokens", fitted.tokens);
    assert!(fitted.errors_shown < all.errors_shown, "{} vs {}", fitted.errors_shown, all.errors_shown);
    assert!(fitted.text.contains("tool5"), "the newest error stays: {}", fitted.text);
    assert!(fitted.text.contains("<error_summary>"), "{}", fitted.text);
    server.stop().await;
}

#[tokio::test]
async fn an_unknown_tools_snippet_lists_the_sessions_tools_nearest_first() {
    let mut server = TestServer::start().await;
    let tools = ["fetch_url", "calculator", "search_docs", "search_web", "read_file"];
    server
        .client
        .start_session(pb::StartSessionRequest {
            session_id: "unknown".into(),
            tools: tools.iter().map(|t| t.to_string()).collect(),
            ..Default::default()
        })
        .await
        .unwrap();
    let outcome = pb::Outcome {
        kind: pb::OutcomeKind::UnknownTool as i32,
        ..failure("unknown", "serch_web", "no such tool: serch_web")
    };
    let v = server.client.report(outcome).await.unwrap().into_inner();
    assert_eq!(v.action, pb::Action::Reclassify as i32);
    assert!(v.snippet.contains("Did you mean `search_web`?"), "{}", v.snippet);
    // Every tool is listed, the nearest names first.
    let at = |t: &str| v.snippet.rfind(&format!("`{t}`")).unwrap_or_else(|| panic!("{t} not listed: {}", v.snippet));
    assert!(at("search_web") < at("search_docs"), "{}", v.snippet);
    assert!(at("search_docs") < at("calculator"), "{}", v.snippet);
    assert!(tools.iter().all(|t| v.snippet.contains(&format!("`{t}`"))), "{}", v.snippet);
    server.stop().await;
}

#[tokio::test]
async fn a_template_in_a_config_file_changes_the_snippet_of_the_real_binary() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rebound.toml");
    std::fs::write(
        &config,
        "[snippet.templates]\nerror_block = \"<tool_error name=\\\"{{ tool }}\\\" kind=\\\"{{ type }}\\\">{{ message }}</tool_error>\"\nsummary = \"({{ total }} older errors)\"\n",
    )
    .unwrap();
    let sidecar = crate::common::Sidecar::spawn(&["--config", config.to_str().unwrap()]);
    let mut client = rebound::pb::rebound_client::ReboundClient::new(crate::common::connect(&sidecar.grpc).await);
    let v = client
        .report(pb::Outcome {
            http_status: 404,
            ..failure("file-tpl", "fetch", "404 Client Error: Not Found for url: https://example.com/x")
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        v.snippet.lines().next().unwrap(),
        "<tool_error name=\"fetch\" kind=\"not_found\">404 Client Error: Not Found for url: https://example.com/x</tool_error>",
        "{}",
        v.snippet
    );
    for i in 0..4 {
        client.report(failure("file-tpl", &format!("other{i}"), &format!("distinct failure {i}x"))).await.unwrap();
    }
    let c =
        client.context(pb::ContextRequest { session_id: "file-tpl".into(), max_tokens: 0 }).await.unwrap().into_inner();
    assert!(c.text.starts_with("(2 older errors)\n<tool_error name="), "{}", c.text);
}
