//! Which server a backend needs, and the command line that starts it.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::protocol::PROTOCOL;

/// The server's source, run with `-c` so that no file has to be found at
/// run time (docs/prefork.md).
pub const SERVER_SOURCE: &str = include_str!("../python/prefork_server.py");

/// What a cold backend's command runs after the interpreter invocation.
const BRIDGE_MODULE: &str = "agentlane_process_bridge";

/// One prefork server: everything that makes two conversations able to
/// share it (a host keeps one server per distinct spec).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServerSpec {
    /// The interpreter invocation: the program (`python`, `uv`, …)…
    pub program: OsString,
    /// …and its arguments up to where `-m agentlane_process_bridge` would be.
    pub args: Vec<OsString>,
    /// `module:factory`.
    pub app: String,
    /// The server's (and so every backend's) cwd; `None`: the host's.
    pub cwd: Option<PathBuf>,
    /// The whole environment; `None`: the host's.
    pub env: Option<Vec<(OsString, OsString)>>,
    /// `process-bridge-supervisor`, which contains the server and, through
    /// `--adopt`, each conversation.
    pub supervisor: PathBuf,
    /// A shared server: the path of a Unix socket the server listens on
    /// once it is ready, for other hosts to [connect](crate::PreforkServer::connect)
    /// to (docs/prefork.md §7). It must not exist yet, in a directory only
    /// this user can enter. `None`: only this host's channel.
    pub listen: Option<PathBuf>,
}

impl ServerSpec {
    /// The spec for a cold backend's command line, when it is one the
    /// server can stand in for: `<invocation…> -m agentlane_process_bridge
    /// --app <module:factory>` (or `--app=<module:factory>`).
    pub fn for_command(program: impl Into<OsString>, args: &[String], supervisor: impl Into<PathBuf>) -> Option<ServerSpec> {
        let (prefix, app) = warm_invocation(args)?;
        Some(ServerSpec {
            program: program.into(),
            args: prefix.iter().map(OsString::from).collect(),
            app,
            cwd: None,
            env: None,
            supervisor: supervisor.into(),
            listen: None,
        })
    }

    /// The server's command line (the program, then its arguments), under
    /// the supervisor with the given grace.
    pub fn command_line(&self, term_grace: Duration) -> (OsString, Vec<OsString>) {
        let mut args: Vec<OsString> = vec![
            "--term-grace-ms".into(),
            term_grace.as_millis().to_string().into(),
            "--".into(),
            self.program.clone(),
        ];
        args.extend(self.args.iter().cloned());
        args.extend([
            "-c".into(),
            SERVER_SOURCE.into(),
            PROTOCOL.to_string().into(),
            bridge_launch::channels::layout_json().into(),
            self.app.clone().into(),
            self.supervisor.clone().into(),
        ]);
        args.extend(self.listen.iter().map(|path| path.clone().into()));
        (self.supervisor.clone().into(), args)
    }
}

/// Splits a cold backend's arguments into the interpreter invocation (what
/// comes before `-m agentlane_process_bridge`) and the app, or `None` when
/// they are not exactly that form.
pub fn warm_invocation(args: &[String]) -> Option<(Vec<String>, String)> {
    let at = args.windows(2).position(|pair| pair[0] == "-m" && pair[1] == BRIDGE_MODULE)?;
    let app = match &args[at + 2..] {
        [flag, app] if flag == "--app" => app.clone(),
        [flag] => flag.strip_prefix("--app=")?.to_owned(),
        _ => return None,
    };
    let (module, attribute) = app.split_once(':')?;
    if module.is_empty() || attribute.is_empty() {
        return None;
    }
    Some((args[..at].to_vec(), app))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn the_forms_a_server_can_stand_in_for() {
        assert_eq!(
            warm_invocation(&strings(&["-m", "agentlane_process_bridge", "--app", "a:b"])),
            Some((vec![], "a:b".into()))
        );
        assert_eq!(
            warm_invocation(&strings(&["run", "--project", "/p", "python", "-m", "agentlane_process_bridge", "--app=a.b:c"])),
            Some((strings(&["run", "--project", "/p", "python"]), "a.b:c".into()))
        );
        assert_eq!(
            warm_invocation(&strings(&["-X", "dev", "-m", "agentlane_process_bridge", "--app", "a:b"])),
            Some((strings(&["-X", "dev"]), "a:b".into()))
        );
        for other in [
            &["script.py"][..],
            &["-m", "agentlane_process_bridge"],
            &["-m", "agentlane_process_bridge", "--app", "a:b", "--extra"],
            &["-m", "agentlane_process_bridge", "--app", "nocolon"],
            &["-m", "other", "--app", "a:b"],
        ] {
            assert_eq!(warm_invocation(&strings(other)), None, "{other:?}");
        }
    }

    #[test]
    fn the_command_line_runs_the_embedded_source_under_the_supervisor() {
        let spec = ServerSpec::for_command("python", &strings(&["-m", "agentlane_process_bridge", "--app", "a:b"]), "/sup").unwrap();
        let (program, args) = spec.command_line(Duration::from_millis(300));
        assert_eq!(program, "/sup");
        let args: Vec<_> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(args[..5], strings(&["--term-grace-ms", "300", "--", "python", "-c"]));
        assert_eq!(args[5], SERVER_SOURCE);
        let layout = bridge_launch::channels::layout_json();
        assert_eq!(args[6..], strings(&["2", &layout, "a:b", "/sup"]));
        let shared = ServerSpec { listen: Some("/run/s.sock".into()), ..spec };
        let (_, args) = shared.command_line(Duration::from_millis(300));
        assert_eq!(args.last().unwrap(), "/run/s.sock");
    }
}
