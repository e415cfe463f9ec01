//! CPU pinning with `sched_setaffinity`, for a whole process (every thread) or one thread.

use crate::Error;

/// Number of CPUs this process may run on (falls back to 1).
pub fn online_cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Builds a `cpu_set_t` from a CPU list (done before `fork`, where allocation is not allowed).
pub(crate) fn build_cpu_set(cpus: &[usize]) -> std::io::Result<libc::cpu_set_t> {
    use std::io::{Error as IoError, ErrorKind};
    if cpus.is_empty() {
        return Err(IoError::new(ErrorKind::InvalidInput, "empty CPU list"));
    }
    // SAFETY: cpu_set_t is plain data; CPU_SET only writes inside it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(IoError::new(
                ErrorKind::InvalidInput,
                format!("CPU {cpu} is out of range"),
            ));
        }
        // SAFETY: cpu is below CPU_SETSIZE (checked above).
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    Ok(set)
}

/// Pins one thread (or, with `tid == 0`, the calling thread) to `cpus`.
pub fn pin_thread(tid: libc::pid_t, cpus: &[usize]) -> Result<(), Error> {
    let set = build_cpu_set(cpus).map_err(|e| Error::io("building a CPU set", e))?;
    // SAFETY: `set` is a valid cpu_set_t and the size matches it.
    let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(Error::io(
            format!("sched_setaffinity({tid}, {cpus:?})"),
            std::io::Error::last_os_error(),
        ))
    }
}

/// Pins the calling thread; threads it spawns afterwards inherit the mask.
pub fn pin_current_thread(cpus: &[usize]) -> Result<(), Error> {
    pin_thread(0, cpus)
}

/// Re-pins every thread of process `pid` (an affinity mask is per thread, so pinning only
/// the main thread would leave the server's connection threads where they were).
pub fn pin_process(pid: u32, cpus: &[usize]) -> Result<(), Error> {
    let dir = format!("/proc/{pid}/task");
    let entries = std::fs::read_dir(&dir).map_err(|e| Error::io(format!("reading {dir}"), e))?;
    for entry in entries.flatten() {
        let Some(tid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        match pin_thread(tid, cpus) {
            Ok(()) => {}
            // A thread that ended between readdir and the call is fine.
            Err(Error::Io { source, .. }) if source.raw_os_error() == Some(libc::ESRCH) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The CPUs thread `tid` (0 = caller) may run on.
pub fn thread_cpus(tid: libc::pid_t) -> Result<Vec<usize>, Error> {
    // SAFETY: zeroed cpu_set_t is valid; the kernel fills at most size_of bytes.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let rc =
        unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(Error::io(
            "sched_getaffinity",
            std::io::Error::last_os_error(),
        ));
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: cpu is below CPU_SETSIZE.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_and_reads_back_the_current_thread() {
        std::thread::spawn(|| {
            pin_current_thread(&[0]).expect("pin");
            assert_eq!(thread_cpus(0).expect("get"), vec![0]);
        })
        .join()
        .expect("thread");
    }

    #[test]
    fn rejects_an_empty_cpu_list() {
        assert!(pin_current_thread(&[]).is_err());
    }
}
