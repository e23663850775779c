/* SPDX-License-Identifier: Apache-2.0 */
/* sd-event and sd_notify helpers. See event-util.h. */
#include <signal.h>
#include <stdarg.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "event-util.h"
#include "string-util.h"
#include "time-util.h"

int cn_event_loop(sd_event *e, usec_t window, bool (*gather)(void *userdata), void *userdata) {
        const struct timespec pause = {
                .tv_sec = (time_t) (window / USEC_PER_SEC),
                .tv_nsec = (long) (window % USEC_PER_SEC * NSEC_PER_USEC),
        };
        int r, code = 0;

        assert(e);
        if (window == 0 || !gather)
                return sd_event_loop(e);
        while (sd_event_get_state(e) != SD_EVENT_FINISHED) {
                r = sd_event_prepare(e);
                if (r == 0 && gather(userdata)) {
                        /* What is ready goes first; the sleep is for what is not there yet. */
                        r = sd_event_wait(e, 0);
                        if (r == 0) {
                                (void) clock_nanosleep(CLOCK_MONOTONIC, 0, &pause, NULL);
                                r = sd_event_prepare(e);
                        }
                }
                if (r == 0)
                        r = sd_event_wait(e, UINT64_MAX);
                if (r > 0)
                        r = sd_event_dispatch(e);
                if (r < 0)
                        return r;
        }
        r = sd_event_get_exit_code(e, &code);
        return r < 0 ? r : code;
}

static int exit_on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        return sd_event_exit(sd_event_source_get_event(s), 0);
}

int cn_event_add_signal(sd_event *e, sd_event_source **ret, int sig, sd_event_signal_handler_t cb,
                        void *userdata) {
        sigset_t mask;
        sd_event_source *s = NULL;
        char desc[32];
        int r;

        assert(e);
        if (sigemptyset(&mask) < 0 || sigaddset(&mask, sig) < 0)
                return -EINVAL;
        r = pthread_sigmask(SIG_BLOCK, &mask, NULL);
        if (r != 0)
                return -r;
        r = sd_event_add_signal(e, ret ? &s : NULL, sig, cb ?: exit_on_signal, userdata);
        if (r < 0)
                return r;
        if (s) {
                (void) snprintf(desc, sizeof(desc), "signal-%s", sigabbrev_np(sig) ?: "?");
                (void) sd_event_source_set_description(s, desc);
                *ret = s;
        }
        return 0;
}

int cn_event_setup_daemon(sd_event *e, sd_event_signal_handler_t on_exit, sd_event_signal_handler_t on_reload,
                          void *userdata) {
        int r;

        assert(e);
        r = cn_event_add_signal(e, NULL, SIGTERM, on_exit, userdata);
        if (r < 0)
                return r;
        r = cn_event_add_signal(e, NULL, SIGINT, on_exit, userdata);
        if (r < 0)
                return r;
        if (on_reload)
                r = cn_event_add_signal(e, NULL, SIGHUP, on_reload, userdata);
        else
                /* A stray SIGHUP must not kill a daemon whose terminal went away. */
                r = signal(SIGHUP, SIG_IGN) == SIG_ERR ? -errno : 0;
        if (r < 0)
                return r;
        r = sd_event_set_watchdog(e, true);
        return r < 0 ? r : 0;
}

/* A status may hold metadata values or error messages: a newline in one would add assignments
 * (READY=1, MAINPID=) of its own to the message. */
static int notify_status(bool ready, const char *fmt, va_list ap) {
        _cleanup_free_ char *s = NULL;

        if (vasprintf(&s, fmt, ap) < 0)
                return -ENOMEM;
        return sd_notifyf(false, "%sSTATUS=%s", ready ? "READY=1\n" : "", cn_string_cc_to_space(s));
}

int cn_notify_ready_status(const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = notify_status(true, fmt, ap);
        va_end(ap);
        return r;
}

int cn_notify_ready(const char *status) {
        return status ? cn_notify_ready_status("%s", status) : sd_notify(false, "READY=1");
}

int cn_notify_status(const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = notify_status(false, fmt, ap);
        va_end(ap);
        return r;
}

int cn_notify_stopping(void) {
        return sd_notify(false, "STOPPING=1");
}

int cn_notify_reloading(void) {
        /* MONOTONIC_USEC lets Type=notify-reload (systemd 253+) match this to the reload request. */
        return sd_notifyf(false, "RELOADING=1\nMONOTONIC_USEC=%llu",
                          (unsigned long long) cn_now(CLOCK_MONOTONIC));
}
