//go:build ignore

/* The constraint above keeps the go command from taking this file for cgo
 * source of the Go test beside it (fill_test.go), which builds it with cc. */

/*
 * fill.c: a softgpu client in C, with nothing but libc and
 * include/softgpu_uapi.h. It fills 4096 bytes of its own memory with 0xA5
 * on the device's copy engine, and checks every byte:
 *
 *	fill [NODE]        NODE: the daemon's node; default as uapi.DefaultNode
 *	fill -hang [NODE]  a stranger: a DELAY of 2^62 cycles, which must be stopped
 *	fill -garbage [NODE]  a stranger: garbage in every ring slot and a wild doorbell
 *	fill -unpopulated [NODE]  a stranger: CHANNEL_START before touching the
 *	                   channel's pages, then holes punched in a started channel
 *
 * The control calls are messages on the node (one datagram out, one
 * back); the submission is not. The whole life of the client:
 *
 *	VERSION                     the daemon speaks our major version
 *	ATTACH                      a context; the public memfd (engines' status
 *	                            pages, read-only), kick and irq eventfds
 *	CHANNEL_OPEN {copy}         a channel; its user memfd (doorbell page and
 *	                            ring, read-write) and status memfd (status
 *	                            page and completions, read-only), all hole
 *	touch every page of both    a store to each user page, a load from each
 *	                            status page: every page of them is ours
 *	CHANNEL_START {channel}     the daemon finds no hole, seals the user
 *	                            memfd, and serves the channel
 *	HOST_REGISTER {memfd}       our sealed memfd, mapped in our context at VA
 *	-- no message from here on --
 *	stores into the ring slot   FILL VA, 4096, 0xA5, FlagFence, fence i+1
 *	store RegDoorbell = i+1     hands the slot to the engine
 *	load RegNeedWakeup          1: the engine may be asleep; write the kick
 *	load RegFence until i+1     the command has completed
 *	read the completion entry   its status is OK
 *	read the memfd              4096 bytes of 0xA5
 *
 * Who writes what: we write the ring slot and RegDoorbell (user memfd);
 * the daemon's engine writes RegNeedWakeup (public memfd), RegFence and
 * the completion entry (status memfd), and our memfd's bytes by DMA. We
 * map the device's pages read-only, and we could not write them if we
 * tried: a reopen of /proc/self/fd/N with O_RDWR gives no writable
 * mapping, because the daemon seals them (check_read_only tries, as a
 * stranger would). Closing the socket (at exit) releases everything we
 * hold.
 */
#define _GNU_SOURCE /* memfd_create, F_ADD_SEALS */

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "softgpu_uapi.h"

/* The ABI is little-endian, and this client stores its words natively. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "softgpu's ABI is little-endian; fill.c stores words natively"
#endif
/* The shared words are read and written with C11 atomics on mapped
 * memory: that is only sound if 64-bit atomics are plain lock-free loads
 * and stores, as the daemon's Go atomics are. */
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free");

enum {
	FILL_SIZE = 4096,
	FILL_VALUE = 0xA5,
	TIMEOUT_SECONDS = 10,
};

/* fail prints what failed and ends the process with status 1. */
static _Noreturn void fail(const char *format, ...)
{
	va_list args;
	va_start(args, format);
	fputs("fill: ", stderr);
	vfprintf(stderr, format, args);
	fputc('\n', stderr);
	va_end(args);
	exit(1);
}

/* errname names an errno of a reply (SOFTGPU_ERR_*). */
static const char *errname(uint32_t errnum)
{
	static const char *const names[] = {
		[SOFTGPU_OK] = "OK",
		[SOFTGPU_ERR_BAD_REQUEST] = "ERR_BAD_REQUEST",
		[SOFTGPU_ERR_SIZE] = "ERR_SIZE",
		[SOFTGPU_ERR_FDS] = "ERR_FDS",
		[SOFTGPU_ERR_INVAL] = "ERR_INVAL",
		[SOFTGPU_ERR_NOT_NEGOTIATED] = "ERR_NOT_NEGOTIATED",
		[SOFTGPU_ERR_VERSION] = "ERR_VERSION",
		[SOFTGPU_ERR_NO_MEMORY] = "ERR_NO_MEMORY",
		[SOFTGPU_ERR_NO_CHANNEL] = "ERR_NO_CHANNEL",
		[SOFTGPU_ERR_NO_ENTRY] = "ERR_NO_ENTRY",
		[SOFTGPU_ERR_PERM] = "ERR_PERM",
		[SOFTGPU_ERR_GONE] = "ERR_GONE",
		[SOFTGPU_ERR_BUSY] = "ERR_BUSY",
		[SOFTGPU_ERR_FAULT] = "ERR_FAULT",
	};
	if (errnum < sizeof names / sizeof names[0] && names[errnum] != NULL)
		return names[errnum];
	return "an errno this client does not know";
}

/* default_node is where uapi.DefaultNode looks: $XDG_RUNTIME_DIR/softgpu/card0,
 * or softgpu-UID/card0 under $TMPDIR (or /tmp). */
static void default_node(char *buf, size_t len)
{
	const char *runtime = getenv("XDG_RUNTIME_DIR");
	if (runtime != NULL && runtime[0] != '\0') {
		snprintf(buf, len, "%s/softgpu/card0", runtime);
		return;
	}
	const char *tmp = getenv("TMPDIR");
	if (tmp == NULL || tmp[0] == '\0')
		tmp = "/tmp";
	snprintf(buf, len, "%s/softgpu-%u/card0", tmp, (unsigned)getuid());
}

/* connect_node opens a connection to the daemon at node. */
static int connect_node(const char *node)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	if (strlen(node) >= sizeof addr.sun_path)
		fail("node path %s is longer than a Unix socket path may be", node);
	strcpy(addr.sun_path, node);
	int sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (sock < 0)
		fail("socket: %s", strerror(errno));
	if (connect(sock, (struct sockaddr *)&addr, sizeof addr) < 0) {
		if (errno == ENOENT || errno == ECONNREFUSED)
			fail("no daemon at %s: is softgpud running? (connect: %s)", node, strerror(errno));
		fail("connecting to %s: %s", node, strerror(errno));
	}
	return sock;
}

/*
 * call makes one control call on sock: request with its argument struct
 * arg (filled in, and filled out by the reply), fds_in sent in SCM_RIGHTS.
 * On success the reply's descriptors, which must number nfds_out, are
 * stored in fds_out. It returns the reply's errno; a reply that breaks the
 * protocol ends the process.
 */
static uint32_t call(int sock, const char *name, uint32_t request, void *arg, const int *fds_in, int nfds_in,
		     int *fds_out, int nfds_out)
{
	static uint64_t seq;
	uint32_t dir = SOFTGPU_IOC_DIR(request), size = SOFTGPU_IOC_SIZE(request);
	unsigned char msg[SOFTGPU_MAX_MESSAGE + 1]; /* one byte more: a longer reply is truncated, and so seen */
	struct softgpu_header h = {.request = request, .seq = ++seq};

	memcpy(msg, &h, sizeof h);
	size_t len = sizeof h;
	if (dir & SOFTGPU_IOC_WRITE) {
		memcpy(msg + len, arg, size);
		len += size;
	}
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * SOFTGPU_MAX_FDS)];
	} control;
	memset(&control, 0, sizeof control);
	struct iovec iov = {.iov_base = msg, .iov_len = len};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds_in > 0) {
		m.msg_control = control.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * nfds_in);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds_in);
		memcpy(CMSG_DATA(c), fds_in, sizeof(int) * nfds_in);
	}
	if (sendmsg(sock, &m, MSG_NOSIGNAL) < 0)
		fail("%s: sendmsg: %s", name, strerror(errno));

	memset(&control, 0, sizeof control);
	iov.iov_len = sizeof msg;
	m = (struct msghdr){.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			    .msg_controllen = sizeof control.buf};
	ssize_t n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
	if (n < 0)
		fail("%s: recvmsg: %s", name, strerror(errno));
	if (n == 0)
		fail("%s: the daemon closed the connection", name);
	if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		fail("%s: the reply is longer than any the protocol has", name);

	int nfds = 0;
	int fds[SOFTGPU_MAX_FDS];
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c != NULL; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		nfds = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		memcpy(fds, CMSG_DATA(c), sizeof(int) * nfds);
	}
	if ((size_t)n < sizeof h)
		fail("%s: a reply of %zd bytes, shorter than a header", name, n);
	memcpy(&h, msg, sizeof h);
	if (h.request != request || h.seq != seq)
		fail("%s: a reply to request %#x seq %llu; the call was %#x seq %llu", name, h.request,
		     (unsigned long long)h.seq, request, (unsigned long long)seq);
	if (h.errnum != SOFTGPU_OK) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		return h.errnum;
	}
	size_t want = sizeof h + ((dir & SOFTGPU_IOC_READ) ? size : 0);
	if ((size_t)n != want || nfds != nfds_out)
		fail("%s: a reply of %zd bytes and %d descriptors; want %zu and %d", name, n, nfds, want, nfds_out);
	if (dir & SOFTGPU_IOC_READ)
		memcpy(arg, msg + sizeof h, size);
	if (nfds > 0)
		memcpy(fds_out, fds, sizeof(int) * nfds);
	return SOFTGPU_OK;
}

/* must_call is call for a call that must succeed. */
#define must_call(sock, name, arg, fds_in, nfds_in, fds_out, nfds_out)                                          \
	do {                                                                                                    \
		_Static_assert(sizeof *(arg) == SOFTGPU_IOC_SIZE(SOFTGPU_IOCTL_##name), #name "'s argument");   \
		uint32_t errnum_ = call((sock), #name, SOFTGPU_IOCTL_##name, (arg), (fds_in), (nfds_in), (fds_out), \
					(nfds_out));                                                            \
		if (errnum_ != SOFTGPU_OK)                                                                      \
			fail(#name ": the daemon answered %s (%u)", errname(errnum_), errnum_);                 \
	} while (0)

/* map maps size bytes of fd, shared, or ends the process. */
static unsigned char *map(int fd, uint64_t size, int prot, const char *what)
{
	void *p = mmap(NULL, size, prot, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		fail("mapping %s (%llu bytes): %s", what, (unsigned long long)size, strerror(errno));
	return p;
}

/* check_read_only tries to write, as a hostile client would, a memfd the
 * daemon passed read-only: it reopens it through /proc/self/fd with
 * O_RDWR and maps that writable, then tries write(2). Both must fail
 * (F_SEAL_FUTURE_WRITE): these are the device's own pages. */
static void check_read_only(int fd, uint64_t size, const char *what)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	int rw = open(path, O_RDWR | O_CLOEXEC);
	if (rw < 0)
		return; /* not even reopened writable */
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0);
	if (p != MAP_FAILED)
		fail("%s, passed read-only, maps writable when reopened through %s", what, path);
	unsigned char byte = 0xff;
	if (pwrite(rw, &byte, 1, (off_t)size - 1) >= 0)
		fail("%s, passed read-only, takes a write(2) when reopened through %s", what, path);
	close(rw);
}

/* populate allocates every page of a channel's two memfds from this
 * process, as CHANNEL_START requires: CHANNEL_OPEN hands them out all
 * hole, and the daemon writes no page of them, so that every page is
 * ours and none the daemon's. A store to each page of the user memfd
 * (writable) and a load from each page of the status memfd (read-only:
 * a load from a hole of a shared mapping allocates a page as a store
 * does) — or MADV_POPULATE_WRITE and MADV_POPULATE_READ. */
static void populate(unsigned char *user, uint64_t user_size, unsigned char *status, uint64_t status_size)
{
	for (uint64_t off = 0; off < user_size; off += SOFTGPU_PAGE_SIZE)
		((volatile unsigned char *)user)[off] = 0;
	unsigned char sum = 0;
	for (uint64_t off = 0; off < status_size; off += SOFTGPU_PAGE_SIZE)
		sum += ((volatile unsigned char *)status)[off];
	(void)sum;
}

/* allocated returns how many bytes of fd's first size are not hole. */
static uint64_t allocated(int fd, uint64_t size)
{
	uint64_t n = 0;
	for (off_t off = 0; (uint64_t)off < size;) {
		off_t data = lseek(fd, off, SEEK_DATA);
		if (data < 0 || (uint64_t)data >= size)
			break; /* ENXIO: hole to the end */
		off_t hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0)
			break;
		n += ((uint64_t)hole < size ? (uint64_t)hole : size) - (uint64_t)data;
		off = hole;
	}
	return n;
}

/* word returns the shared 64-bit word at byte offset off of a mapping. */
static _Atomic uint64_t *word(unsigned char *base, uint64_t off)
{
	return (_Atomic uint64_t *)(base + off);
}

static void put16(unsigned char *p, uint16_t v) { memcpy(p, &v, sizeof v); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, sizeof v); }

/* now_seconds reads CLOCK_MONOTONIC. */
static double now_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ring rings the copy engine's doorbell: it stores tail, then kicks the
 * engine if it may be asleep. The store publishes the slot's stores
 * before it (it is a release, and more); the engine's load of
 * RegDoorbell pairs with it.
 *
 * The need-wakeup check, after the doorbell store (abi/idle.go): an
 * engine on its way to sleep stores RegNeedWakeup = 1, then loads the
 * doorbell once more. Both sides store, then load what the other stored,
 * all sequentially consistent, so one of the two loads sees the other's
 * store: the engine finds our tail and runs, or this load reads 1 and the
 * kick wakes it. A 0 here proves no kick is needed. */
static void ring(_Atomic uint64_t *doorbell, uint64_t tail, unsigned char *public, int kick)
{
	atomic_store_explicit(doorbell, tail, memory_order_seq_cst);
	if (atomic_load_explicit(word(public, SOFTGPU_PUBLIC_ENGINE_OFFSET(SOFTGPU_ENGINE_COPY) + SOFTGPU_REG_NEED_WAKEUP),
				 memory_order_seq_cst) != 0) {
		uint64_t one = 1;
		/* The eventfd is non-blocking; EAGAIN means its count is full,
		 * so a kick is pending already. */
		if (write(kick, &one, sizeof one) != sizeof one && errno != EAGAIN)
			fail("writing the kick eventfd: %s", strerror(errno));
	}
}

/* channel_fault waits up to TIMEOUT_SECONDS for the daemon to fault the
 * channel, and returns the fault; 0 (SOFTGPU_FAULT_NONE) if it did not. */
static uint64_t channel_fault(unsigned char *status)
{
	_Atomic uint64_t *fault = word(status, SOFTGPU_STATUS_PAGE_OFFSET + SOFTGPU_REG_CHANNEL_FAULT);
	double deadline = now_seconds() + TIMEOUT_SECONDS;
	while (atomic_load(fault) == SOFTGPU_FAULT_NONE && now_seconds() < deadline)
		sched_yield();
	return atomic_load(fault);
}

/*
 * The stranger's attacks (fill -hang, fill -garbage): what a hostile
 * client can do with nothing but the pages the daemon gave it. Each ends
 * with the daemon faulting this client's channel and no other: the Go
 * test that runs it (fill_test.go) checks that a victim's round trips kept
 * their latency meanwhile.
 */

/* hang submits a DELAY of 2^62 cycles, a command that never ends, and
 * waits for the daemon's watchdog to stop it and fault the channel. */
static int hang(unsigned char *user, unsigned char *status, unsigned char *public, int kick, uint32_t context,
		uint32_t mask)
{
	_Atomic uint64_t *doorbell = word(user, SOFTGPU_USER_DOORBELL_OFFSET + SOFTGPU_REG_DOORBELL);
	uint64_t index = atomic_load_explicit(doorbell, memory_order_relaxed);
	unsigned char *slot = user + SOFTGPU_USER_RING_OFFSET + SOFTGPU_SLOT_OFFSET(index, mask);
	memset(slot, 0, SOFTGPU_COMMAND_SIZE);
	slot[SOFTGPU_OFF_OPCODE] = SOFTGPU_OP_DELAY;
	slot[SOFTGPU_OFF_FLAGS] = SOFTGPU_FLAG_FENCE;
	put16(slot + SOFTGPU_OFF_CONTEXT, (uint16_t)context);
	put64(slot + SOFTGPU_OFF_SEQ, index);
	put64(slot + SOFTGPU_OFF_VALUE, (uint64_t)1 << 62);
	put64(slot + SOFTGPU_OFF_FENCE, index + 1);
	ring(doorbell, index + 1, public, kick);
	printf("hanging\n");
	fflush(stdout);
	uint64_t fault = channel_fault(status);
	if (fault == SOFTGPU_FAULT_NONE)
		fail("a DELAY of 2^62 cycles still runs after %d s: the daemon did not stop it", TIMEOUT_SECONDS);
	printf("ok: the daemon stopped the DELAY and faulted the channel (fault %llu)\n", (unsigned long long)fault);
	return 0;
}

/* garbage fills every ring slot and the rest of the doorbell page with
 * pseudo-random bytes and hands the engine a full ring of them, then
 * rings a doorbell far past the ring's end, and waits for the daemon to
 * fault the channel. */
static int garbage(unsigned char *user, unsigned char *status, unsigned char *public, int kick, uint32_t ring_size)
{
	_Atomic uint64_t *doorbell = word(user, SOFTGPU_USER_DOORBELL_OFFSET + SOFTGPU_REG_DOORBELL);
	uint64_t index = atomic_load_explicit(doorbell, memory_order_relaxed);
	uint64_t x = 0x9e3779b97f4a7c15u; /* xorshift64: the same garbage every run */
	for (uint64_t off = SOFTGPU_USER_DOORBELL_OFFSET + 8; off < SOFTGPU_USER_RING_OFFSET; off += 8) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		atomic_store(word(user, off), x);
	}
	for (uint64_t off = 0; off < (uint64_t)ring_size * SOFTGPU_COMMAND_SIZE; off += 8) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		put64(user + SOFTGPU_USER_RING_OFFSET + off, x);
	}
	ring(doorbell, index + ring_size, public, kick);
	ring(doorbell, index + 5 * (uint64_t)ring_size + 3, public, kick);
	printf("garbage\n");
	fflush(stdout);
	uint64_t fault = channel_fault(status);
	if (fault == SOFTGPU_FAULT_NONE)
		fail("a doorbell %u slots past the ring's end: no channel fault after %d s", 5 * ring_size + 3,
		     TIMEOUT_SECONDS);
	printf("ok: the daemon faulted the channel (fault %llu)\n", (unsigned long long)fault);
	return 0;
}

/* unpopulated starts the channel before touching its pages, which the
 * daemon must refuse having allocated none of them; then populates and
 * starts it, and tries every way to punch a hole in its files, which the
 * kernel must refuse: the files' pages are ours, and stay there. */
static void unpopulated(int sock, uint32_t channel, const int *fds, unsigned char *user, uint64_t user_size,
			unsigned char *status, uint64_t status_size)
{
	int user_fd = fds[SOFTGPU_CHANNEL_FD_USER], status_fd = fds[SOFTGPU_CHANNEL_FD_STATUS];
	if (allocated(user_fd, user_size) != 0 || allocated(status_fd, status_size) != 0)
		fail("CHANNEL_OPEN: the daemon allocated %llu bytes of the user memfd and %llu of the status memfd",
		     (unsigned long long)allocated(user_fd, user_size),
		     (unsigned long long)allocated(status_fd, status_size));
	struct softgpu_channel_start start = {.channel = channel};
	uint32_t errnum = call(sock, "CHANNEL_START", SOFTGPU_IOCTL_CHANNEL_START, &start, NULL, 0, NULL, 0);
	if (errnum != SOFTGPU_ERR_INVAL)
		fail("CHANNEL_START of a channel whose pages are all hole: the daemon answered %s (%u), not ERR_INVAL",
		     errname(errnum), errnum);
	if (allocated(user_fd, user_size) != 0 || allocated(status_fd, status_size) != 0)
		fail("a refused CHANNEL_START allocated pages of the channel's memfds");
	printf("unpopulated\n");
	fflush(stdout);
	populate(user, user_size, status, status_size);
	must_call(sock, CHANNEL_START, &start, NULL, 0, NULL, 0);
	if (fallocate(user_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)user_size) == 0 || errno != EPERM)
		fail("a hole punched in the started channel's user memfd: %s", strerror(errno));
	if (madvise(user, user_size, MADV_REMOVE) == 0 || errno != EPERM)
		fail("MADV_REMOVE of the started channel's user memfd: %s", strerror(errno));
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", status_fd);
	int rw = open(path, O_RDWR | O_CLOEXEC);
	if (rw >= 0) {
		if (fallocate(rw, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)status_size) == 0 || errno != EPERM)
			fail("a hole punched in the status memfd reopened O_RDWR: %s", strerror(errno));
		close(rw);
	}
	if (allocated(user_fd, user_size) != user_size || allocated(status_fd, status_size) != status_size)
		fail("a started channel's memfds have a hole");
	printf("ok: the daemon refused to start the channel before its pages were ours, and no hole goes in a started one\n");
}

int main(int argc, char **argv)
{
	char node[4096];
	enum { FILL, HANG, GARBAGE, UNPOPULATED } mode = FILL;
	if (argc > 1 && strcmp(argv[1], "-hang") == 0)
		mode = HANG, argc--, argv++;
	else if (argc > 1 && strcmp(argv[1], "-garbage") == 0)
		mode = GARBAGE, argc--, argv++;
	else if (argc > 1 && strcmp(argv[1], "-unpopulated") == 0)
		mode = UNPOPULATED, argc--, argv++;
	if (argc > 2)
		fail("usage: fill [-hang|-garbage|-unpopulated] [NODE]");
	if (argc == 2)
		snprintf(node, sizeof node, "%s", argv[1]);
	else
		default_node(node, sizeof node);
	int sock = connect_node(node);

	/* VERSION: the first call on every connection. */
	struct softgpu_version version = {.major = SOFTGPU_VERSION_MAJOR, .minor = SOFTGPU_VERSION_MINOR};
	must_call(sock, VERSION, &version, NULL, 0, NULL, 0);
	if (version.major != SOFTGPU_VERSION_MAJOR)
		fail("VERSION: the daemon speaks %u.%u; this client %u.%u", version.major, version.minor,
		     SOFTGPU_VERSION_MAJOR, SOFTGPU_VERSION_MINOR);

	/* ATTACH: a context, and the memory every client shares. */
	struct softgpu_attach attach = {0};
	int attach_fds[SOFTGPU_IOCTL_ATTACH_FDS_OUT];
	must_call(sock, ATTACH, &attach, NULL, 0, attach_fds, SOFTGPU_IOCTL_ATTACH_FDS_OUT);
	if (attach.public_size != SOFTGPU_PUBLIC_SIZE || attach.context > UINT16_MAX)
		fail("ATTACH: public memfd of %llu bytes (want %llu), context %u", (unsigned long long)attach.public_size,
		     (unsigned long long)SOFTGPU_PUBLIC_SIZE, attach.context);
	unsigned char *public = map(attach_fds[SOFTGPU_ATTACH_FD_PUBLIC], attach.public_size, PROT_READ, "the public memfd");
	check_read_only(attach_fds[SOFTGPU_ATTACH_FD_PUBLIC], attach.public_size, "the public memfd");
	int kick = attach_fds[SOFTGPU_ATTACH_FD_KICK];
	if (atomic_load(word(public, SOFTGPU_PUBLIC_GLOBAL_OFFSET + SOFTGPU_REG_ID)) != SOFTGPU_DEVICE_ID)
		fail("the public memfd's RegID is not softgpu's");

	/* CHANNEL_OPEN: a channel on the copy engine, which runs FILL. */
	struct softgpu_channel_open channel = {.engine = SOFTGPU_ENGINE_COPY, .priority = SOFTGPU_PRIORITY_NORMAL};
	int channel_fds[SOFTGPU_IOCTL_CHANNEL_OPEN_FDS_OUT];
	must_call(sock, CHANNEL_OPEN, &channel, NULL, 0, channel_fds, SOFTGPU_IOCTL_CHANNEL_OPEN_FDS_OUT);
	uint32_t ring_size = channel.ring_size, mask = ring_size - 1;
	if (ring_size == 0 || (ring_size & mask) != 0 || channel.user_size != SOFTGPU_USER_SIZE(ring_size) ||
	    channel.status_size != SOFTGPU_STATUS_SIZE(ring_size))
		fail("CHANNEL_OPEN: rings of %u slots in memfds of %llu and %llu bytes do not fit the layout", ring_size,
		     (unsigned long long)channel.user_size, (unsigned long long)channel.status_size);
	unsigned char *user = map(channel_fds[SOFTGPU_CHANNEL_FD_USER], channel.user_size, PROT_READ | PROT_WRITE,
				  "the user memfd");
	unsigned char *status = map(channel_fds[SOFTGPU_CHANNEL_FD_STATUS], channel.status_size, PROT_READ,
				    "the status memfd");
	check_read_only(channel_fds[SOFTGPU_CHANNEL_FD_STATUS], channel.status_size, "the status memfd");

	/* CHANNEL_START, once every page of both memfds is ours. */
	if (mode == UNPOPULATED) {
		unpopulated(sock, channel.channel, channel_fds, user, channel.user_size, status, channel.status_size);
		return 0;
	}
	populate(user, channel.user_size, status, channel.status_size);
	struct softgpu_channel_start start = {.channel = channel.channel};
	must_call(sock, CHANNEL_START, &start, NULL, 0, NULL, 0);

	/* HOST_REGISTER: our own memory, sealed so that the daemon may map it. */
	int mem = memfd_create("softgpu-fill", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mem < 0)
		fail("memfd_create: %s", strerror(errno));
	if (ftruncate(mem, FILL_SIZE) < 0)
		fail("ftruncate of the memfd: %s", strerror(errno));
	if (fcntl(mem, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0)
		fail("sealing the memfd: %s", strerror(errno));
	unsigned char *buffer = map(mem, FILL_SIZE, PROT_READ | PROT_WRITE, "our memfd");
	struct softgpu_host_register reg = {.size = FILL_SIZE, .page_size = SOFTGPU_PAGE4K};
	must_call(sock, HOST_REGISTER, &reg, &mem, 1, NULL, 0);

	if (mode == HANG)
		return hang(user, status, public, kick, attach.context, mask);
	if (mode == GARBAGE)
		return garbage(user, status, public, kick, ring_size);

	/*
	 * The submission: stores, no message. RegDoorbell is the ring's
	 * tail, one past the last command handed over, so its value now is
	 * the index of our command. We are the doorbell's only writer, so
	 * the relaxed load is enough: it reads our own last store, or the
	 * value the daemon set before it handed the channel over.
	 */
	_Atomic uint64_t *doorbell = word(user, SOFTGPU_USER_DOORBELL_OFFSET + SOFTGPU_REG_DOORBELL);
	_Atomic uint64_t *fence = word(status, SOFTGPU_STATUS_PAGE_OFFSET + SOFTGPU_REG_FENCE);
	uint64_t index = atomic_load_explicit(doorbell, memory_order_relaxed);
	uint64_t fence_value = index + 1;
	if (SOFTGPU_REACHED(atomic_load(fence), fence_value))
		fail("the channel's fence timeline is already at %llu, past our fence %llu",
		     (unsigned long long)atomic_load(fence), (unsigned long long)fence_value);

	/* The slot: plain stores, published by the doorbell store below. The
	 * whole slot is cleared first: reserved bytes must be zero. */
	unsigned char *slot = user + SOFTGPU_USER_RING_OFFSET + SOFTGPU_SLOT_OFFSET(index, mask);
	memset(slot, 0, SOFTGPU_COMMAND_SIZE);
	slot[SOFTGPU_OFF_OPCODE] = SOFTGPU_OP_FILL;
	slot[SOFTGPU_OFF_FLAGS] = SOFTGPU_FLAG_FENCE;
	put16(slot + SOFTGPU_OFF_CONTEXT, (uint16_t)attach.context);
	put64(slot + SOFTGPU_OFF_SEQ, index);
	put64(slot + SOFTGPU_OFF_DST, reg.va);
	put64(slot + SOFTGPU_OFF_SIZE, FILL_SIZE);
	put64(slot + SOFTGPU_OFF_VALUE, FILL_VALUE);
	put64(slot + SOFTGPU_OFF_FENCE, fence_value);

	ring(doorbell, index + 1, public, kick);

	/* Wait: poll the fence timeline. This load pairs with the engine's
	 * store of RegFence, which it makes after the completion entry and
	 * after the fill's stores into our memory: seeing the fence, we see
	 * both. */
	double deadline = now_seconds() + TIMEOUT_SECONDS;
	while (!SOFTGPU_REACHED(atomic_load_explicit(fence, memory_order_seq_cst), fence_value)) {
		uint64_t fault = atomic_load(word(status, SOFTGPU_STATUS_PAGE_OFFSET + SOFTGPU_REG_CHANNEL_FAULT));
		if (fault != SOFTGPU_FAULT_NONE)
			fail("the engine faulted the channel (fault %llu, value %#llx)", (unsigned long long)fault,
			     (unsigned long long)atomic_load(
				     word(status, SOFTGPU_STATUS_PAGE_OFFSET + SOFTGPU_REG_CHANNEL_FAULT_VALUE)));
		if (now_seconds() > deadline)
			fail("timed out after %d s waiting for fence %llu; the timeline reads %llu", TIMEOUT_SECONDS,
			     (unsigned long long)fence_value, (unsigned long long)atomic_load(fence));
		sched_yield();
	}

	/* The completion entry: its index word names our command, and the
	 * status beside it is OK. */
	unsigned char *completions = status + SOFTGPU_STATUS_COMPLETIONS_OFFSET;
	uint64_t entry = SOFTGPU_COMPLETION_WORD(index, mask) * sizeof(uint64_t);
	uint64_t completed = atomic_load(word(completions, entry + 8 * SOFTGPU_COMPLETION_INDEX_WORD));
	uint32_t result = (uint32_t)atomic_load(word(completions, entry + 8 * SOFTGPU_COMPLETION_STATUS_WORD));
	if (completed != index)
		fail("the completion entry names command %llu; ours is %llu", (unsigned long long)completed,
		     (unsigned long long)index);
	if (result != SOFTGPU_STATUS_OK)
		fail("FILL completed with status %u, not SOFTGPU_STATUS_OK", result);

	for (size_t i = 0; i < FILL_SIZE; i++)
		if (buffer[i] != FILL_VALUE)
			fail("byte %zu of the memfd is %#x after the fill; want %#x", i, buffer[i], FILL_VALUE);
	printf("ok: %d bytes filled by the device\n", FILL_SIZE);
	close(sock); /* the daemon releases the channel, the memory and the context */
	return 0;
}
