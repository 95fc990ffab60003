// Lockrun runs a command under a Redis lock, like flock(1) across machines, or
// etcdctl lock and consul lock:
//
//	lockrun [flags] NAME -- COMMAND [ARGS...]
//	lockrun [-redis URL] [-prefix P] [-fenced] -status NAME
//
// Every machine that runs the same NAME against the same Redis takes turns: the
// command runs only while this lockrun holds the lock, which it keeps alive
// (refreshing every ttl/3) until the command exits, then releases.
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
// Flags:
//
//	-redis URL      Redis to lock on (default $LEASEKIT_REDIS_URL, else
//	                redis://127.0.0.1:6379). rediss:// for TLS;
//	                redis://user:password@host:port/db for ACLs. Prefer the
//	                environment variable for a password: arguments are visible
//	                to every user in ps.
//	-prefix P       key prefix (default "leasekit:"); the lock is P{NAME}
//	-ttl D          lease length (default 30s), refreshed every ttl/3
//	-wait D         wait up to D for the lock (default 0: try once)
//	-fenced         take a correctness lease; the command gets its token
//	-once PERIOD    run at most once per PERIOD per NAME, across all machines:
//	                the lock is kept until PERIOD has passed since the run
//	                started, whatever the command's status (cron
//	                deduplication; not with -fenced, -wait or -ttl)
//	-grace D        time between SIGTERM and SIGKILL when the lock is lost
//	                (default 10s; 0 kills at once)
//	-status NAME    print whether NAME is held, its remaining ttl and its last
//	                fencing token, and exit (with -redis and -prefix)
//
// The command inherits lockrun's standard input, output and error and its
// environment, plus LEASEKIT_KEY (the lock's NAME) and, with -fenced,
// LEASEKIT_TOKEN (the lease's fencing token); inherited values of those two are
// dropped. SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to
// lockrun are forwarded to the command. (A Ctrl-C at a terminal reaches both
// already, so the command sees SIGINT twice.)
//
// When the lease is lost while the command runs (a refresh finds the key
// deleted or taken, or Redis cannot confirm the lease before it would expire),
// lockrun says so on standard error, sends the command SIGTERM, then SIGKILL
// after -grace, and exits 74.
//
// Exit status:
//
//	the command's   when it ran and the lease held (128+N if signal N killed it,
//	                as a shell reports it; 126 or 127 if it could not start)
//	75              the lock was held by another owner (or, with -once, the
//	                command already ran this period)
//	74              the lease was lost while the command ran, or was found
//	                gone at release
//	69              Redis could not be reached (or failed while locking)
//	64              bad usage
//
// -status prints key: value lines (lock, key, held, ttl, last token) and exits
// 0. It never prints the holder's owner id: that id is what releases the lock.
package main
