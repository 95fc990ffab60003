// Lockrun runs a command under a Redis lock, like flock(1) across machines, or
// etcdctl lock and consul lock:
//
//	lockrun [flags] NAME -- COMMAND [ARGS...]
//	lockrun [-redis URL] [-prefix P] [-fenced | -n N] -status NAME
//	lockrun [-redis URL] [-prefix P] [-fenced] -break NAME
//
// Every machine that runs the same NAME against the same Redis takes turns: the
// command, and every process it starts, runs only while this lockrun holds the
// lock, which it keeps alive (refreshing every ttl/3) until they have all
// exited, then releases.
//
// What is guaranteed, and what is not. Without -fenced the lock is an
// efficiency lock (package efficiency): it stops two runs from overlapping as
// long as Redis keeps the key and lockrun is not paused past its lease. A
// lockrun or machine that freezes (SIGSTOP, a VM migration, a swap storm) past
// the ttl can wake up with its command still running while another machine's
// run has started: use it where an overlap costs a duplicate run, not damage.
// With -fenced the lease carries a fencing token (package correctness), passed
// to the command as LEASEKIT_TOKEN; it is only safe if every write the command
// makes carries the token and the resource rejects an older one.
//
// With -n N, NAME is a semaphore (package efficiency's Semaphore): up to N
// runs of NAME go at once, on any machines, each holding a permit. As with a
// lock, a run that finds all N held is skipped (75) unless it has -wait D:
// then it queues, in arrival order, for up to D, as Semaphore.Acquire does.
// A permit is an efficiency lease, with the same guarantee and the same
// limit as the lock. Every run of NAME must pass the same N while permits
// are held: a run with another N is refused (64), so that two crontabs
// cannot disagree on the limit unnoticed; once none is held, the next run's
// N takes effect.
//
// Flags:
//
//	-redis URL      Redis to lock on (default $LEASEKIT_REDIS_URL, else
//	                redis://127.0.0.1:6379). rediss:// for TLS;
//	                redis://user:password@host:port/db for ACLs. Prefer the
//	                environment variable for a password: arguments are visible
//	                to every user in ps.
//	-prefix P       key prefix (default "leasekit:"); the lock is P{NAME}
//	-ttl D          lease length (default 30s), refreshed every ttl/3
//	-wait D         wait up to D for the lock, or with -n a permit (default
//	                0: try once)
//	-fenced         take a correctness lease; the command gets its token
//	-n N            run while holding one of N permits of the semaphore NAME
//	                rather than the lock NAME (not with -fenced or -once)
//	-audit          with -fenced: check the Redis settings fencing relies on
//	                (persistence, eviction, replication) at the first acquire,
//	                and warn on stderr (default true). -audit=false silences the warnings,
//	                which cron would otherwise mail on every run, once you
//	                have read them.
//	-once PERIOD    run at most once per PERIOD per NAME, across all machines:
//	                the lock is kept until PERIOD has passed since the run
//	                started, whatever the command's status (cron
//	                deduplication; not with -fenced, -wait or -ttl)
//	-grace D        time between SIGTERM and SIGKILL when lockrun stops the
//	                command's processes: the lease was lost, or the command
//	                exited leaving processes behind (default 10s; 0 kills at
//	                once)
//	-quiet          print nothing when the run is skipped because another
//	                owner holds the lock (or, with -once, the period already
//	                ran); the status is still 75. Not the default: at a
//	                terminal or in a journal a silent skip looks like a run
//	                that did nothing, while a crontab says -quiet once.
//	-status NAME    print whether NAME is held, its remaining ttl, its live
//	                waiters and its last fencing token, and exit (with
//	                -redis and -prefix); with -n, the semaphore's limit,
//	                holders and waiters. A NAME that is no lock's but a
//	                semaphore's with permits held gets the semaphore's
//	                status without -n (and -break refuses it, exit 64)
//	-break NAME     end the lease on the lock NAME at once, whoever holds
//	                it, and exit: the first live waiter gets the lock, as the
//	                holder's release would hand it. The holder is not asked
//	                and may still be running until its next refresh (its
//	                lockrun then stops its command, exit 74), so break only a
//	                holder known to be dead. With -fenced, a correctness
//	                break: the next grant's token is higher, so fences refuse
//	                the broken holder, and an election's leader is deposed.
//	                Not with -n: a semaphore has no single holder, and a dead
//	                holder's permit returns at its ttl
//
// The command inherits lockrun's standard input, output and error and its
// environment, plus LEASEKIT_NAME (the lock's NAME) and, with -fenced,
// LEASEKIT_TOKEN (the lease's fencing token); inherited values of those are
// dropped. LEASEKIT_KEY is set to the NAME too, for commands written for
// earlier versions; it is deprecated.
//
// In a crontab, use -once. A plain lock only stops runs from overlapping: a
// job that takes 50 ms, started by the crons of two machines 200 ms apart,
// runs twice, once on each. -once PERIOD keeps the lock until PERIOD has
// passed since the run started, so that the later machine skips the tick;
// keep PERIOD a little below the cron interval, so that the next tick finds
// the lock free.
//
// The command's processes. The command runs in a process group of its own, so
// that lockrun reaches what it starts: a shell's children, a pipeline.
// SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to lockrun are
// forwarded to the whole group, and so are the SIGTERM and SIGKILL that stop
// it. lockrun exits, and releases the lock, only once no process of the group
// is left: when the command exits but leaves processes in its group
// (sh -c 'job & exit 0'), lockrun says so on standard error, sends them
// SIGTERM, then SIGKILL after -grace, and releases when they are gone; its
// status is still the command's. A process that leaves the group (setsid, as
// daemons do) escapes lockrun: do not start daemons under it.
//
// When lockrun itself is killed (SIGKILL, the OOM killer), it can neither
// stop the command nor release the lock, which stays held until its ttl runs
// out. On Linux the command's whole group is then killed with SIGKILL, a
// shell's children and background jobs included, so that none of it runs on
// without the lock and overlaps the next run. A guardian does it: lockrun
// re-executed, one small process per run (ps shows "lockrun: guardian
// PGID"), that waits on a pipe only lockrun can write to and kills the group
// when the kernel closes the pipe at lockrun's death, however it died.
// lockrun ends it once the group is gone; it adds no Redis round trip. What
// it cannot reach: a process that left the group (setsid, setpgid; a shell
// with job control, such as bash after set -m, gives each job a group of its
// own); the group of a guardian itself killed (kill -9 on its pid) or
// stopped; and what the command started in the instant before the guardian
// started, should lockrun be killed in that instant (the command itself
// still dies, by a parent-death signal). Under systemd,
// KillMode=control-group stops even those. Elsewhere than on Linux there is
// no guardian, and the command runs on.
//
// At a terminal. When lockrun's standard input is its controlling terminal
// and lockrun is the foreground job there (started by hand from a shell), the
// command's group becomes the terminal's foreground job while it runs, as a
// shell does for its jobs: the command can read the terminal, and Ctrl-C and
// Ctrl-\ reach it directly, once (lockrun, and a script that started it, no
// longer see them). Ctrl-Z does not suspend it: lockrun continues it at once,
// since a suspended command would keep the lock from every other machine
// while the shell, which knows only lockrun, could not resume it. Elsewhere
// (cron, systemd, input redirected, lockrun started with &) the group is in
// the background, and its signals come from lockrun; a command that reads the
// terminal there stops (SIGTTIN), as any background job does, while lockrun
// keeps the lock: give it input that is not a terminal.
//
// When the lease is lost while the command runs (a refresh finds the key
// deleted or taken, or Redis cannot confirm the lease before it would expire),
// lockrun says so on standard error, sends the command's group SIGTERM, then
// SIGKILL after -grace, and exits 74 once the group is gone.
//
// Exit status:
//
//	the command's   when it ran and the lease held (128+N if signal N killed
//	                it, as a shell reports it; as a shell does, 127 if there is
//	                no such command, 126 if it cannot be executed: no x bit, a
//	                directory, a missing #! interpreter)
//	77              Redis refused the credentials of -redis (WRONGPASS,
//	                NOAUTH) or a command to its user (NOPERM): fix the URL or
//	                the ACL, retrying will not help
//	75              the lock was held by another owner (with -n, all N
//	                permits were; with -once, the command already ran this
//	                period)
//	74              the lease was lost while the command ran, or was found
//	                gone at release
//	69              Redis could not be reached (or failed while locking)
//	65              a key of the lock holds what leasekit does not write
//	                (a value of another type, a fence counter that holds no
//	                token), found by a run or by -status
//	64              bad usage, or an -n other than the N the semaphore's
//	                held permits were granted under
//
// -break exits 0 when it broke a lease, 1 when nobody held the lock
// (nothing was broken), and 65, 69, 77 as above.
//
// -status prints key: value lines (lock, kind, key, held, ttl, refreshing,
// waiters, last token) and exits 0; kind is "lock", "fenced lock (-fenced)" or
// "election (-fenced)", as the name's keys show. Given the runs' -ttl,
// refreshing says whether the holder still refreshes its lease, as a live
// lockrun does every ttl/3, or has stopped (killed, crashed, paused) and blocks
// the name until its lease runs out; without -ttl it reads "unknown", since a
// guess could call a live holder stopped. waiters counts the live waiters
// queued (an entry whose process is gone is not counted); it reads "unknown"
// for a user who may only read keys. With -n it prints the semaphore's
// (semaphore, key, limit, held, a "holder: ttl D" line per permit, waiting: the
// live waiters, a "waiter: queued D ago" line per queue entry) instead. A lock
// whose holder's lease lapsed with waiters queued reads as not held: the first
// live waiter takes it at its next attempt. It never prints the holder's owner
// id: that id is what releases the lock. When the lock's key is not a string,
// or the fence counter is not a string holding a non-negative integer below the
// largest 64-bit one, the held or last token line says what is there ("held:
// unknown: the key holds a list, not a lock", `last token: "x" (not a fencing
// token: the counter is corrupt)`) and lockrun exits 65, so that a script
// watching its locks notices the key: a lock key that is not a string keeps
// every run out, and a corrupt counter every -fenced run, which exit 65 too.
// Seeing what a foreign lock key holds takes TYPE, beyond the ACL the README
// gives leasekit; without it such a key reads as held.
package main
