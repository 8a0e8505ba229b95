//! The threads of a recording and their command names, kept as Linux perf keeps them
//! (`tools/perf/util/machine.c`, `thread.c`) while it walks a file in time order: which
//! name `perf script` and `perf report` show for a sample depends on exactly these rules.
//!
//! * A thread is created the first time a record names it (a sample, COMM, MMAP, or the
//!   parent of a FORK) with no name of its own yet: perf then shows `:TID`. Creating a
//!   thread of another process creates that process's leader too.
//! * COMM sets the name from that record's time on (exec or not).
//! * FORK replaces any thread with the child's tid by a new one, which takes its parent's
//!   name when the parent has one. A parent known under another pid than the record says
//!   is taken for a stale thread and replaced too.
//! * EXIT removes the thread (perf 6.8 and later), so a sample taken after it (the exiting
//!   task seen by a system-wide event) belongs to a new, nameless thread: `:TID`. `perf
//!   report`, and any session with AUX data, keeps exited threads instead
//!   ([`Threads::set_exited`]).
//! * Thread 0 is the idle task, named `swapper`.

use rustc_hash::FxHashMap;

/// One thread: its process and its current command name.
#[derive(Debug, Clone)]
struct Thread {
    pid: i32,
    /// The name in force, or `:TID` while the thread has none.
    comm: String,
    comm_set: bool,
}

impl Thread {
    fn new(pid: i32, tid: i32) -> Self {
        Thread {
            pid,
            comm: format!(":{tid}"),
            comm_set: false,
        }
    }
}

/// What [`Threads`] does with a thread at its EXIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExitedThreads {
    /// Forgotten, as `perf script` forgets it: a later sample shows `:TID`.
    #[default]
    Forget,
    /// Kept with its name, as `perf report` keeps it (and perf with any tool when the
    /// file holds AUX data).
    Keep,
}

/// The threads of a recording, updated by its side-band records in time order.
#[derive(Debug, Clone)]
pub struct Threads {
    /// By tid. Fx: a daemon looks a thread up for every side-band record and every
    /// stack, and the ids are the kernel's, not an attacker's keys to collide.
    threads: FxHashMap<i32, Thread>,
    exited: ExitedThreads,
}

impl Default for Threads {
    fn default() -> Self {
        Self::new()
    }
}

impl Threads {
    /// The threads before any record: only the idle task (perf's
    /// `perf_session__register_idle_thread`).
    pub fn new() -> Self {
        let mut threads = Threads {
            threads: FxHashMap::default(),
            exited: ExitedThreads::Forget,
        };
        threads.set_comm(0, 0, "swapper");
        threads
    }

    /// What to do with a thread at its EXIT (forget it, until this is called).
    pub fn set_exited(&mut self, exited: ExitedThreads) {
        self.exited = exited;
    }

    /// perf's `machine__findnew_thread`: the thread `tid`, created when unknown; a
    /// known thread whose pid was unknown (-1) takes `pid`.
    fn find_or_create(&mut self, pid: i32, tid: i32) -> &mut Thread {
        let leader = match self.threads.get_mut(&tid) {
            Some(thread) => {
                // machine__update_thread_pid
                if pid != -1 && thread.pid == -1 && pid != thread.pid {
                    thread.pid = pid;
                    (pid != tid).then_some(pid)
                } else {
                    None
                }
            }
            None => {
                self.threads.insert(tid, Thread::new(pid, tid));
                // thread__init_maps: another process's thread shares its leader's maps,
                // and finds (creates) the leader for them.
                (pid != tid && pid != -1).then_some(pid)
            }
        };
        if let Some(leader) = leader {
            self.find_or_create(leader, leader);
        }
        // Present: inserted or found above, and creating the leader (another tid)
        // does not remove it.
        self.threads
            .entry(tid)
            .or_insert_with(|| Thread::new(pid, tid))
    }

    /// The name perf shows for a sample of `pid`/`tid` now: the thread's command, or
    /// `:TID` when it has none (the thread is created, as perf's lookup creates it).
    pub fn comm(&mut self, pid: i32, tid: i32) -> &str {
        &self.find_or_create(pid, tid).comm
    }

    /// PERF_RECORD_COMM.
    pub fn set_comm(&mut self, pid: i32, tid: i32, comm: &str) {
        let thread = self.find_or_create(pid, tid);
        comm.clone_into(&mut thread.comm);
        thread.comm_set = true;
    }

    /// PERF_RECORD_MMAP / MMAP2 of a user-space mapping: perf looks the thread up (and
    /// so creates it).
    pub fn mmap(&mut self, pid: i32, tid: i32) {
        self.find_or_create(pid, tid);
    }

    /// PERF_RECORD_FORK (`machine__process_fork_event`).
    pub fn fork(&mut self, pid: i32, ppid: i32, tid: i32, ptid: i32) {
        if self.find_or_create(ppid, ptid).pid != ppid {
            // "removing erroneous parent thread": a stale thread under the parent's
            // tid, left by a lost EXIT or FORK.
            self.threads.remove(&ptid);
            self.find_or_create(ppid, ptid);
        }
        let parent = self.threads.get(&ptid).cloned();
        self.threads.remove(&tid);
        let child = self.find_or_create(pid, tid);
        if let Some(parent) = parent.filter(|parent| parent.comm_set) {
            child.comm = parent.comm;
            child.comm_set = true;
        }
    }

    /// PERF_RECORD_EXIT (`machine__process_exit_event`).
    pub fn exit(&mut self, tid: i32) {
        if self.exited == ExitedThreads::Forget {
            self.threads.remove(&tid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_without_a_comm_is_shown_as_its_tid_until_its_comm() {
        let mut threads = Threads::new();
        assert_eq!(threads.comm(100, 100), ":100");
        threads.set_comm(100, 100, "prog");
        assert_eq!(threads.comm(100, 100), "prog");
        threads.set_comm(100, 100, "renamed");
        assert_eq!(threads.comm(100, 100), "renamed");
    }

    #[test]
    fn the_idle_task_is_swapper() {
        let mut threads = Threads::new();
        assert_eq!(threads.comm(0, 0), "swapper");
    }

    #[test]
    fn a_forked_thread_takes_its_parents_name_and_replaces_an_older_thread() {
        let mut threads = Threads::new();
        threads.set_comm(100, 100, "prog");
        // A thread 101 left over from earlier, with a name of its own.
        threads.set_comm(50, 101, "old");
        threads.fork(100, 100, 101, 100);
        assert_eq!(threads.comm(100, 101), "prog");
        // The child's own name later on.
        threads.set_comm(100, 101, "worker");
        assert_eq!(threads.comm(100, 101), "worker");
        assert_eq!(threads.comm(100, 100), "prog");
    }

    #[test]
    fn a_child_of_a_nameless_parent_is_nameless_even_if_its_tid_had_a_name() {
        let mut threads = Threads::new();
        threads.set_comm(7, 7, "stale");
        threads.fork(7, 6, 7, 6);
        assert_eq!(threads.comm(7, 7), ":7");
    }

    #[test]
    fn a_parent_known_under_another_pid_is_replaced() {
        let mut threads = Threads::new();
        // Thread 20 was seen as part of process 10, with a name.
        threads.set_comm(10, 20, "old");
        // Now a FORK says 20 is the leader of process 20 and forks 21.
        threads.fork(20, 20, 21, 20);
        assert_eq!(threads.comm(20, 21), ":21");
        assert_eq!(threads.comm(20, 20), ":20");
    }

    #[test]
    fn an_exited_thread_is_forgotten_unless_kept() {
        let mut threads = Threads::new();
        threads.set_comm(100, 100, "prog");
        threads.exit(100);
        assert_eq!(threads.comm(100, 100), ":100");

        let mut kept = Threads::new();
        kept.set_exited(ExitedThreads::Keep);
        kept.set_comm(100, 100, "prog");
        kept.exit(100);
        assert_eq!(kept.comm(100, 100), "prog");
    }

    #[test]
    fn a_thread_learns_its_pid_once() {
        let mut threads = Threads::new();
        threads.mmap(-1, 30);
        threads.set_comm(30, 30, "x");
        threads.fork(30, 30, 31, 30);
        // The parent was known with pid -1, then 30: not stale, so its name passes on.
        assert_eq!(threads.comm(30, 31), "x");
    }
}
