/* clockshim: a library preloaded into redis-server (LD_PRELOAD) that adds an
 * offset to its wall clock, so that a test can step the server's clock as NTP
 * would, without touching the machine's. The offset, in microseconds, is the
 * little-endian int64 at the start of the file $CLOCKSHIM_FILE, mapped once
 * and read at every call; the monotonic clock is left alone. No call here
 * allocates: jemalloc reads the clock while it starts. Built by redistest
 * (clock.go) with the machine's C compiler. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int64_t *offset_us;
static int ready;

static int64_t offset(void) {
	if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
		const char *path = getenv("CLOCKSHIM_FILE");
		if (path) {
			int fd = open(path, O_RDONLY);
			if (fd >= 0) {
				void *p = mmap(NULL, 8, PROT_READ, MAP_SHARED, fd, 0);
				close(fd);
				if (p != MAP_FAILED)
					offset_us = p;
			}
		}
		__atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
	}
	return offset_us ? *offset_us : 0;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
	static int (*real)(clockid_t, struct timespec *);
	if (!real)
		real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
	int r = real(id, ts);
	if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
		int64_t ns = (int64_t)ts->tv_nsec + offset() * 1000;
		int64_t s = ns / 1000000000;
		ns %= 1000000000;
		if (ns < 0) {
			ns += 1000000000;
			s--;
		}
		ts->tv_sec += s;
		ts->tv_nsec = ns;
	}
	return r;
}

int gettimeofday(struct timeval *tv, void *tz) {
	struct timespec ts;
	(void)tz;
	int r = clock_gettime(CLOCK_REALTIME, &ts);
	if (r == 0 && tv) {
		tv->tv_sec = ts.tv_sec;
		tv->tv_usec = ts.tv_nsec / 1000;
	}
	return r;
}

time_t time(time_t *t) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (t)
		*t = ts.tv_sec;
	return ts.tv_sec;
}
