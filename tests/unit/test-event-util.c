/* SPDX-License-Identifier: Apache-2.0 */
/* Daemon wiring: SIGHUP reaches the reload callback, SIGTERM ends the loop cleanly, sd_notify
 * messages arrive on NOTIFY_SOCKET as systemd would read them. cn_event_loop(): answers awaited
 * together are dispatched together, a ready one at once, none delayed without gathering. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "event-util.h"
#include "tap.h"
#include "time-util.h"

static int reloads;

static int on_reload(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        reloads++;
        (void) cn_notify_reloading();
        /* The test sends SIGTERM only after the reload was handled. */
        (void) kill(getpid(), SIGTERM);
        return 0;
}

static int send_hup(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) kill(getpid(), SIGHUP);
        return 0;
}

static int safety(sd_event_source *s, uint64_t usec, void *userdata) {
        return sd_event_exit(sd_event_source_get_event(s), 99);
}

/* cn_event_loop(): one pipe written before the loop starts, four more GATHER_LATER after the loop
 * read the first, the loop's reads timed. */
#define GATHER_PIPES 5
#define GATHER_LATER (200 * USEC_PER_MSEC)
#define GATHER_WINDOW (600 * USEC_PER_MSEC)

typedef struct Gather {
        int fds[GATHER_PIPES][2];
        int first_read[2]; /* the loop tells the writer that it read the first pipe */
        usec_t read_at[GATHER_PIPES];
        unsigned n_read;
        bool on; /* what the gather callback answers */
        unsigned asked;
} Gather;

static bool gather_cb(void *userdata) {
        Gather *g = userdata;

        g->asked++;
        return g->on;
}

static int on_pipe(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Gather *g = userdata;
        char c;

        for (unsigned i = 0; i < GATHER_PIPES; i++)
                if (g->fds[i][0] == fd)
                        g->read_at[i] = cn_now(CLOCK_MONOTONIC);
        (void) read(fd, &c, 1);
        if (fd == g->fds[0][0])
                (void) write(g->first_read[1], "x", 1);
        (void) sd_event_source_set_enabled(s, SD_EVENT_OFF);
        if (++g->n_read == GATHER_PIPES)
                return sd_event_exit(sd_event_source_get_event(s), 7);
        return 0;
}

static void *writer(void *userdata) {
        Gather *g = userdata;
        struct timespec later = { .tv_nsec = (long) (GATHER_LATER * NSEC_PER_USEC) };
        char c;

        (void) read(g->first_read[0], &c, 1);
        (void) clock_nanosleep(CLOCK_MONOTONIC, 0, &later, NULL);
        for (unsigned i = 1; i < GATHER_PIPES; i++)
                (void) write(g->fds[i][1], "x", 1);
        return NULL;
}

/* The latest read of pipes 1.. minus the read of pipe 0 and the spread of those later reads. */
static int run_gather(bool on, usec_t *ret_after_first, usec_t *ret_spread, unsigned *ret_asked) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        sd_event_source *src[GATHER_PIPES] = {};
        Gather g = { .on = on };
        usec_t lo = USEC_INFINITY, hi = 0;
        pthread_t t;
        int r;

        if (sd_event_new(&e) < 0 || pipe2(g.first_read, O_CLOEXEC) < 0)
                return -1;
        for (unsigned i = 0; i < GATHER_PIPES; i++)
                if (pipe2(g.fds[i], O_CLOEXEC) < 0 ||
                    sd_event_add_io(e, &src[i], g.fds[i][0], EPOLLIN, on_pipe, &g) < 0)
                        return -1;
        if (pthread_create(&t, NULL, writer, &g) != 0 || write(g.fds[0][1], "x", 1) != 1)
                return -1;
        r = cn_event_loop(e, GATHER_WINDOW, gather_cb, &g);
        (void) pthread_join(t, NULL);
        for (unsigned i = 0; i < GATHER_PIPES; i++) {
                sd_event_source_unref(src[i]);
                close(g.fds[i][0]);
                close(g.fds[i][1]);
                if (i > 0) {
                        lo = MIN(lo, g.read_at[i]);
                        hi = MAX(hi, g.read_at[i]);
                }
        }
        close(g.first_read[0]);
        close(g.first_read[1]);
        *ret_after_first = lo - g.read_at[0];
        *ret_spread = hi - lo;
        *ret_asked = g.asked;
        return r;
}

static void test_gather(void) {
        usec_t after, spread;
        unsigned asked;

        TAP_EQ_INT(run_gather(true, &after, &spread, &asked), 7, "cn_event_loop() returns the exit code");
        TAP_OK(after >= GATHER_WINDOW, "answers not ready yet waited the window (%.0f ms after the first)",
               (double) after / USEC_PER_MSEC);
        TAP_OK(spread < GATHER_LATER, "and were dispatched together (%.1f ms apart)", (double) spread / USEC_PER_MSEC);
        TAP_OK(asked > 0, "the loop asked whether to gather (%u times)", asked);
        TAP_EQ_INT(run_gather(false, &after, &spread, &asked), 7, "without gathering");
        TAP_OK(after < GATHER_WINDOW, "answers are dispatched as they come (%.0f ms after the first)",
               (double) after / USEC_PER_MSEC);
}

static char *recv_notify(int fd) {
        char buf[512];
        ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
        if (n < 0)
                return NULL;
        buf[n] = 0;
        return strdup(buf);
}

int main(void) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        _cleanup_(sd_event_source_unrefp) sd_event_source *hup = NULL, *guard = NULL;
        _cleanup_free_ char *m1 = NULL, *m2 = NULL, *m3 = NULL;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char dir[] = "/tmp/cn-test-event-XXXXXX";
        int fd, r;

        test_gather();
        if (!mkdtemp(dir))
                return 1;
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/notify", dir);
        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return 1;
        setenv("NOTIFY_SOCKET", sa.sun_path, 1);
        unsetenv("WATCHDOG_USEC");

        TAP_EQ_INT(sd_event_new(&e), 0, "event loop");
        TAP_EQ_INT(cn_event_setup_daemon(e, NULL, on_reload, NULL), 0, "daemon signal setup");
        (void) sd_event_add_time_relative(e, &hup, CLOCK_MONOTONIC, 10 * USEC_PER_MSEC, 0, send_hup, NULL);
        (void) sd_event_add_time_relative(e, &guard, CLOCK_MONOTONIC, 5 * USEC_PER_SEC, 0, safety, NULL);

        TAP_OK(cn_notify_ready("Initialized node n1") > 0, "READY sent to NOTIFY_SOCKET");
        m1 = recv_notify(fd);
        TAP_EQ_STR(m1, "READY=1\nSTATUS=Initialized node n1", "READY message content");

        r = sd_event_loop(e);
        TAP_EQ_INT(reloads, 1, "SIGHUP called the reload callback once");
        TAP_EQ_INT(r, 0, "SIGTERM exits the loop with 0 (not the safety timeout)");
        m2 = recv_notify(fd);
        TAP_OK(m2 && strncmp(m2, "RELOADING=1\nMONOTONIC_USEC=", 27) == 0, "RELOADING message with MONOTONIC_USEC sent");
        TAP_OK(cn_notify_stopping() > 0 && (m3 = recv_notify(fd)) && streq(m3, "STOPPING=1"), "STOPPING message");
        {
                /* A metadata value in a status line must not add assignments of its own. */
                _cleanup_free_ char *m4 = NULL, *m5 = NULL;

                TAP_OK(cn_notify_status("Failed to read the instance metadata: %s", "bad\nREADY=1\nMAINPID=1\r\t\x1b") > 0 &&
                               (m4 = recv_notify(fd)),
                       "STATUS with control characters sent");
                TAP_EQ_STR(m4, "STATUS=Failed to read the instance metadata: bad READY=1 MAINPID=1   ",
                           "control characters in a status become spaces");
                TAP_OK(cn_notify_ready("node\nMAINPID=1") > 0 && (m5 = recv_notify(fd)), "READY with a hostile status");
                TAP_EQ_STR(m5, "READY=1\nSTATUS=node MAINPID=1", "only READY=1 and STATUS are assigned");
        }

        unsetenv("NOTIFY_SOCKET");
        TAP_EQ_INT(cn_notify_ready(NULL), 0, "outside systemd notify is a no-op");
        close(fd);
        unlink(sa.sun_path);
        rmdir(dir);
        return tap_done();
}
