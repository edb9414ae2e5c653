//! `--exec`: the supervisor as a launcher only. It places the backend's
//! descriptors with the launch layer (`bridge_launch::place`: exactly
//! stdin, stdout, stderr and the declared channels survive the exec) and
//! then becomes the backend: the same process, so the pid and process group
//! the host made are the backend's, and nothing stays between them.
//!
//! Why: a host that spawns a backend without supervision (the Node
//! package's grouped mode) cannot choose what the child inherits (libuv
//! passes on every descriptor without close-on-exec); going through this
//! mode gives that start the same descriptor guarantee as every other.
//!
//! The control socket (fd 3, close-on-exec) only carries a failure:
//! `failed <ERRNO> <number> <message>` when the exec cannot be made (then
//! exit 127). Its end of file without a line means the backend runs.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::process::Command;

use bridge_launch::place::Placement;
use bridge_launch::LAYOUT;

/// Places the declared `channels` (and nothing else) and execs `command`;
/// returns only by exiting when that cannot be done.
pub fn exec(command: &str, args: &[String], channels: &[i32], control: &mut Option<File>) -> ! {
    let mut placement = Placement::new();
    for &fd in channels {
        match LAYOUT
            .iter()
            .find(|channel| channel.fd == fd && !channel.always)
        {
            Some(channel) => placement.put(*channel, fd),
            None => crate::control::fatal(&format!(
                "--channel-fd {fd}: not a declared channel of the launch layer"
            )),
        };
    }
    // SAFETY: this process is about to exec and runs one thread (no signal
    // handler nor thread has been set up yet): changing its descriptor
    // table here is what `apply` is for.
    if let Err(error) = unsafe { placement.apply() } {
        let told = format!("cannot place the backend's descriptors: {error}");
        crate::control::cannot_start(
            control,
            error.raw_os_error().unwrap_or(nix::libc::EIO),
            &error.to_string(),
            &told,
        );
    }
    // Caught signals are reset on exec; std resets SIGPIPE to its default.
    let error = Command::new(command).args(args).exec();
    let number = error.raw_os_error().unwrap_or(nix::libc::EIO);
    let told = format!("cannot start {command}: {error}");
    crate::control::cannot_start(control, number, &error.to_string(), &told)
}
