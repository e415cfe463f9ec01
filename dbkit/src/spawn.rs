//! Starting child processes that die with us.
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits, not the process.
//! So every child is forked by one dedicated spawner thread that never returns; a killed
//! test binary or loadgen then takes its server down with it instead of leaking it.

use std::io;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::sync::OnceLock;

/// How a child is started.
#[derive(Debug, Clone, Default)]
pub struct SpawnOptions {
    /// Pin the child (and so every thread it creates) to these CPUs before `exec`.
    pub cpus: Option<Vec<usize>>,
    /// Put the child in its own process group, so a terminal's Ctrl-C reaches only us and
    /// we decide how to tear the child down.
    pub new_process_group: bool,
}

struct Request {
    cmd: Command,
    opts: SpawnOptions,
    reply: mpsc::Sender<io::Result<Child>>,
}

static SPAWNER: OnceLock<mpsc::Sender<Request>> = OnceLock::new();

fn spawner() -> &'static mpsc::Sender<Request> {
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("dbkit-spawner".into())
            .spawn(move || {
                for req in rx {
                    let Request {
                        mut cmd,
                        opts,
                        reply,
                    } = req;
                    let _ = reply.send(spawn_here(&mut cmd, &opts));
                }
                // The sender lives in a static, so the channel never closes and this thread
                // never returns; park forever just in case, since returning would SIGKILL
                // every child it forked.
                loop {
                    std::thread::park();
                }
            })
            .expect("spawning the dbkit spawner thread");
        tx
    })
}

/// Spawns `cmd` from the spawner thread with `PR_SET_PDEATHSIG = SIGKILL`.
pub fn spawn(cmd: Command, opts: SpawnOptions) -> io::Result<Child> {
    let (reply, rx) = mpsc::channel();
    spawner()
        .send(Request { cmd, opts, reply })
        .map_err(|_| io::Error::other("dbkit spawner thread is gone"))?;
    rx.recv()
        .map_err(|_| io::Error::other("dbkit spawner thread did not answer"))?
}

fn spawn_here(cmd: &mut Command, opts: &SpawnOptions) -> io::Result<Child> {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // Built before fork: nothing in pre_exec may allocate.
    let cpu_set = match &opts.cpus {
        Some(cpus) => Some(crate::affinity::build_cpu_set(cpus)?),
        None => None,
    };
    let new_group = opts.new_process_group;
    // SAFETY: the closure only makes async-signal-safe syscalls (prctl, getppid, setpgid,
    // sched_setaffinity, _exit) and does not allocate.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl; then nobody would kill us.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            if new_group && libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if let Some(set) = &cpu_set {
                let size = std::mem::size_of::<libc::cpu_set_t>();
                if libc::sched_setaffinity(0, size, set) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    cmd.spawn()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawned_child_runs_pinned_in_its_own_group() {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg("grep Cpus_allowed_list /proc/self/status; ps -o pgid= -p $$; echo $$");
        cmd.stdout(std::process::Stdio::piped());
        let child = spawn(
            cmd,
            SpawnOptions {
                cpus: Some(vec![0]),
                new_process_group: true,
            },
        )
        .expect("spawn");
        let out = child.wait_with_output().expect("wait");
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines();
        assert!(lines.next().unwrap_or("").ends_with("\t0"), "{text}");
        let pgid = lines.next().unwrap_or("").trim().to_string();
        let pid = lines.next().unwrap_or("").trim().to_string();
        assert_eq!(pgid, pid, "{text}");
    }
}
