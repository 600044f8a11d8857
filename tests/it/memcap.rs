//! A memory cap for a server under attack: a cgroup (v1 `memory`
//! controller, as this kind of machine mounts it, or v2 where the unified
//! hierarchy has the controller) that a test moves the server into, so an
//! attack that grows memory without bound gets the process killed by the
//! kernel, as a container's limit would, instead of taking the machine.
//! And the process's own peak RSS (`VmHWM`), the figure the tests bound.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// One cgroup with a memory limit; removed (its processes killed) on drop.
pub struct MemCap {
    dir: PathBuf,
    v2: bool,
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

impl MemCap {
    /// A cgroup limited to `bytes` (page cache counts, but is reclaimed
    /// before anything is killed). Panics with the reason when this machine
    /// has no writable memory controller: the attack tests need one.
    pub fn new(bytes: u64) -> MemCap {
        let name = format!(
            "stormwatch-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let v1 = Path::new("/sys/fs/cgroup/memory");
        let (dir, v2) = if v1.join("memory.limit_in_bytes").exists() {
            (v1.join(&name), false)
        } else {
            (Path::new("/sys/fs/cgroup").join(&name), true)
        };
        std::fs::create_dir(&dir).unwrap_or_else(|e| {
            panic!(
                "creating the memory cgroup {}: {e} (the attack tests run the server under a memory cap; run them as root on a machine with a memory controller)",
                dir.display()
            )
        });
        let (file, value) = if v2 {
            ("memory.max", bytes.to_string())
        } else {
            ("memory.limit_in_bytes", bytes.to_string())
        };
        std::fs::write(dir.join(file), value)
            .unwrap_or_else(|e| panic!("setting {}/{file}: {e}", dir.display()));
        if !v2 {
            // No swap on these machines, but say so: the cap is on memory + swap.
            let _ = std::fs::write(dir.join("memory.memsw.limit_in_bytes"), bytes.to_string());
        }
        MemCap { dir, v2 }
    }

    /// Move process `pid` (all its threads) into the cgroup.
    pub fn add(&self, pid: u32) {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string())
            .unwrap_or_else(|e| panic!("moving {pid} into {}: {e}", self.dir.display()));
    }

    /// The most memory charged to the cgroup at once (bytes): its
    /// processes' anonymous memory, the page cache and kernel memory they
    /// brought in (pages cached already, such as a binary another run
    /// loaded, are charged elsewhere). Read after they are gone.
    pub fn peak(&self) -> u64 {
        let file = if self.v2 {
            "memory.peak"
        } else {
            "memory.max_usage_in_bytes"
        };
        std::fs::read_to_string(self.dir.join(file))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    /// How many times the kernel's OOM killer acted in the cgroup.
    pub fn oom_kills(&self) -> u64 {
        let file = if self.v2 {
            "memory.events"
        } else {
            "memory.oom_control"
        };
        std::fs::read_to_string(self.dir.join(file))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("oom_kill ")?.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for MemCap {
    fn drop(&mut self) {
        if let Ok(procs) = std::fs::read_to_string(self.dir.join("cgroup.procs")) {
            for pid in procs.split_whitespace() {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", pid])
                    .status();
            }
        }
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// A process's peak resident set (`VmHWM`) in bytes; 0 once it is gone.
pub fn peak_rss(pid: u32) -> u64 {
    status_kib(pid, "VmHWM:") * 1024
}

/// A process's resident set now (`VmRSS`) in bytes; 0 once it is gone.
pub fn rss(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:") * 1024
}

fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

#[test]
fn the_cap_kills_what_outgrows_it_and_peaks_are_read() {
    let cap = MemCap::new(64 << 20);
    // A shell that grows a string far past 64 MiB.
    let mut child = std::process::Command::new("sh")
        .args(["-c", "sleep 0.2; x=a; while :; do x=$x$x; done"])
        .spawn()
        .unwrap();
    cap.add(child.id());
    let status = child.wait().unwrap();
    assert!(!status.success(), "the shell should have been killed");
    assert!(cap.oom_kills() >= 1, "no OOM kill counted");
    assert!(peak_rss(std::process::id()) > 0);
}
