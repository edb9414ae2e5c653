//! `agentlane-bridge check`: the two-step check, as a client of a bridge it
//! starts itself (the same way a program in another language would).
//!
//! Step 1, the control path: `Ping`, `GetVersion` (api, protocol major 1,
//! the backend's version) and a call without the token, refused as
//! `unauthenticated`. Step 2, the reverse direction: two real runs; the
//! client answers every approval the agent asks for, allowing in the first
//! run and denying in the second, and checks that the resolved records, the
//! tool results and the final answers reflect its decision. Step 3, the
//! host's own tools (`check_tool.rs`).

use std::io::{BufRead, BufReader};
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use connectrpc::client::{ClientConfig, HttpClient};
use connectrpc::ErrorCode;
use serde_json::Value;

use crate::cli::CheckArgs;
use crate::proto::agentlane::bridge::v1 as pb;
use crate::proto::agentlane::bridge::v1::__buffa::oneof::prompt_response::Item;

type Failure = String;

/// The reason sent with the denials of step 2.
const DENIAL: &str = "Denied by agentlane-bridge check.";

pub fn run(args: CheckArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("check: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(check(args)) {
        Ok(()) => {
            println!("check: passed");
            ExitCode::SUCCESS
        }
        Err(failure) => {
            println!("check: FAILED: {failure}");
            ExitCode::FAILURE
        }
    }
}

/// The bridge under check: killed if the check ends early.
struct Bridge(std::process::Child);

impl Drop for Bridge {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

async fn check(args: CheckArgs) -> Result<(), Failure> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find agentlane-bridge itself: {e}"))?;
    let mut child = std::process::Command::new(exe)
        .args(args.serve.to_args())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start agentlane-bridge: {e}"))?;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut bridge = Bridge(child);
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map(|_| line)
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("reading the discovery line: {e}"))?;
    let discovery: Value = match line
        .trim_end()
        .split_once(' ')
        .and_then(|(_, rest)| rest.split_once(' '))
    {
        Some(("ready", json)) => {
            serde_json::from_str(json).map_err(|e| format!("bad discovery line: {e}"))?
        }
        Some(("failed", json)) => return Err(format!("the bridge did not start: {json}")),
        _ => return Err(format!("unexpected first line: {line:?}")),
    };
    if discovery["schema"] != 1 || discovery["api"] != "agentlane.bridge.v1" {
        return Err(format!("unknown discovery line: {line}"));
    }
    let url = discovery["url"].as_str().ok_or("no url")?.to_owned();
    let token_file = discovery["tokenFile"].as_str().ok_or("no tokenFile")?;
    let token =
        std::fs::read_to_string(token_file).map_err(|e| format!("reading the token file: {e}"))?;
    println!(
        "bridge ready at {url} (pid {}), token in {token_file}",
        discovery["pid"]
    );

    let http = HttpClient::plaintext();
    let base = ClientConfig::new(url.parse().map_err(|e| format!("bad url {url}: {e}"))?);
    let authorized = base
        .clone()
        .with_default_header("authorization", format!("Bearer {}", token.trim()));
    let control = pb::BridgeControlServiceClient::new(http.clone(), authorized.clone());
    let conversations = pb::ConversationServiceClient::new(http.clone(), authorized.clone());
    let agent = pb::AgentServiceClient::new(http.clone(), authorized);

    // Step 1: the control path.
    let pong = control
        .ping(pb::PingRequest::default())
        .await
        .map_err(|e| format!("Ping: {e}"))?
        .into_owned();
    expect(
        pong.message == "pong",
        format!("Ping answered {:?}", pong.message),
    )?;
    let version = control
        .get_version(pb::GetVersionRequest::default())
        .await
        .map_err(|e| format!("GetVersion: {e}"))?
        .into_owned();
    expect(
        version.api == "agentlane.bridge.v1",
        format!("GetVersion.api is {:?}", version.api),
    )?;
    expect(
        bridge_core::is_supported_protocol_version(&version.protocol_version),
        format!(
            "unsupported protocol version {:?}",
            version.protocol_version
        ),
    )?;
    let ready: Value = serde_json::from_str(&version.ready_json)
        .map_err(|e| format!("GetVersion.ready_json: {e}"))?;
    let backend_version = ready["version"]
        .as_str()
        .ok_or("ready_json has no version")?;
    let anonymous = pb::BridgeControlServiceClient::new(http.clone(), base);
    match anonymous.ping(pb::PingRequest::default()).await {
        Err(error) if error.code == ErrorCode::Unauthenticated => {}
        other => {
            return Err(format!(
                "a call without the token was not refused as unauthenticated: {other:?}"
            ))
        }
    }
    println!(
        "step 1: ok (pong; bridge {}, api {}, protocol {}, agentlane {backend_version}; no token -> unauthenticated)",
        version.bridge_version, version.api, version.protocol_version
    );

    // Step 2: a real conversation, approvals answered by this client.
    if !args.step1_only {
        for allowed in [true, false] {
            let run = converse(&agent, &args.prompt, allowed).await?;
            println!(
                "step 2: ok ({} approval(s) {}; tool result {}; final answer {})",
                run.approvals,
                if allowed { "allowed" } else { "denied" },
                run.tool_result,
                run.final_output
            );
        }
        // Step 3: one tool of the host's own.
        match crate::check_tool::step3(&conversations, &agent, &args.tool_prompt)
            .await
            .map_err(|failure| format!("step 3: {failure}"))?
        {
            crate::check_tool::Outcome::Passed { calls, final_output } => println!(
                "step 3: ok (the agent called the host's tool {:?} {calls} time(s); final answer {final_output:?})",
                crate::check_tool::TOOL
            ),
            crate::check_tool::Outcome::NotTaken(why) if args.require_tools => {
                return Err(format!("step 3: {why}"))
            }
            crate::check_tool::Outcome::NotTaken(why) => {
                println!("step 3: skipped, the app does not take host tools ({why})")
            }
        }
    }

    let stopped = control
        .shutdown(pb::ShutdownRequest::default())
        .await
        .map_err(|e| format!("Shutdown: {e}"))?
        .into_owned();
    let status = tokio::task::spawn_blocking(move || bridge.0.wait())
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    expect(status.success(), format!("the bridge exited with {status}"))?;
    println!(
        "shutdown: ok (backend exit code {}, bridge exit {status})",
        stopped.backend_exit_code
    );
    Ok(())
}

fn expect(condition: bool, failure: String) -> Result<(), Failure> {
    condition.then_some(()).ok_or(failure)
}

struct Run {
    approvals: usize,
    tool_result: Value,
    final_output: Value,
}

/// One run of step 2: reads the `Prompt` stream and answers each approval
/// on a second connection while the stream stays open.
async fn converse(
    agent: &pb::AgentServiceClient<HttpClient>,
    prompt: &str,
    allowed: bool,
) -> Result<Run, Failure> {
    let mut stream = agent
        .prompt(pb::PromptRequest {
            text: prompt.to_owned(),
            ..Default::default()
        })
        .await
        .map_err(|e| format!("Prompt: {e}"))?;
    let mut answers = Vec::new();
    let mut decisions = Vec::new();
    let mut tool_ends = Vec::new();
    let mut terminal = None;
    loop {
        let message = tokio::time::timeout(Duration::from_secs(60), stream.message())
            .await
            .map_err(|_| "the run made no progress for 60 s".to_owned())?
            .map_err(|e| format!("the Prompt stream failed: {e}"))?;
        let Some(message) = message else { break };
        let event = match message.to_owned_message().item {
            Some(Item::Event(event)) => event,
            Some(Item::InvalidLine(invalid)) => {
                return Err(format!(
                    "the backend wrote an invalid line: {}",
                    invalid.message
                ))
            }
            _ => continue,
        };
        let json: Value =
            serde_json::from_str(&event.json).map_err(|e| format!("event {}: {e}", event.seq))?;
        let record = &json["event"];
        match (event.r#type.as_str(), record["type"].as_str()) {
            ("run_event", Some("tool_approval")) => {
                let approval = &record["payload"]["event"]["record"];
                let id = approval["request_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                match approval["status"].as_str() {
                    Some("pending") => {
                        let agent = agent.clone_client();
                        let request = pb::ApproveRequest {
                            id: id.clone(),
                            allowed,
                            reason: (!allowed).then(|| DENIAL.to_owned()),
                            ..Default::default()
                        };
                        answers.push(tokio::spawn(async move {
                            agent.approve(request).await.map(|_| ())
                        }));
                    }
                    Some("resolved") => decisions.push(approval["final_decision"].clone()),
                    _ => {}
                }
            }
            ("run_event", Some("tool_end")) => tool_ends.push(record["payload"].clone()),
            ("run_complete" | "run_cancelled" | "error", _) => terminal = Some(json),
            _ => {}
        }
    }
    for answer in answers.drain(..) {
        answer
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("Approve: {e}"))?;
    }
    let terminal = terminal.ok_or("the Prompt stream ended without a terminal event")?;
    expect(
        terminal["type"] == "run_complete",
        format!("the run did not complete: {terminal}"),
    )?;
    expect(
        !decisions.is_empty(),
        "the agent asked for no approval; step 2 needs an app with a tool that needs one".into(),
    )?;
    let outcome = if allowed { "allow" } else { "deny" };
    for decision in &decisions {
        expect(
            decision["outcome"] == outcome,
            format!("resolved as {decision}, not {outcome}"),
        )?;
        if !allowed {
            expect(
                decision["reason"] == DENIAL,
                format!("denial reason {}", decision["reason"]),
            )?;
        }
    }
    let tool = tool_ends.last().ok_or("no tool_end after the approval")?;
    let tool_result = tool["result"].clone();
    if allowed {
        expect(
            tool["ok"] == true,
            format!("the allowed tool failed: {tool}"),
        )?;
    } else {
        expect(
            tool_result.to_string().contains(DENIAL),
            format!("the tool result {tool_result} does not carry the denial"),
        )?;
    }
    let final_output = terminal["final_output"].clone();
    if let (Some(answer), Some(result)) = (final_output.as_str(), tool_result.as_str()) {
        expect(
            answer.contains(result),
            format!("the final answer {answer:?} does not reflect the tool result {result:?}"),
        )?;
    }
    Ok(Run {
        approvals: decisions.len(),
        tool_result,
        final_output,
    })
}

trait CloneClient {
    fn clone_client(&self) -> Self;
}

impl CloneClient for pb::AgentServiceClient<HttpClient> {
    fn clone_client(&self) -> Self {
        pb::AgentServiceClient::new(HttpClient::plaintext(), self.config().clone())
    }
}
