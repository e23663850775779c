/* SPDX-License-Identifier: Apache-2.0 */
/* sd-event helpers every daemon needs: signal sources (libsystemd 252 does not block the signal
 * for us), the usual SIGTERM/SIGINT/SIGHUP wiring plus the watchdog, and sd_notify wrappers. */
#pragma once

#include <stdbool.h>
#include <systemd/sd-event.h>

#include "macro.h"
#include "time-util.h"

/* Blocks sig in this thread and adds a signal source. A NULL callback exits the loop with 0. */
int cn_event_add_signal(sd_event *e, sd_event_source **ret, int sig, sd_event_signal_handler_t cb,
                        void *userdata);

/* SIGTERM and SIGINT call on_exit (NULL: exit the loop with 0), SIGHUP calls on_reload (NULL: SIGHUP
 * is ignored), and the loop answers systemd's watchdog when WATCHDOG_USEC is set. The sources
 * live as long as the loop (floating). */
int cn_event_setup_daemon(sd_event *e, sd_event_signal_handler_t on_exit, sd_event_signal_handler_t on_reload,
                          void *userdata);

/* sd_event_loop() that lets answers come together. When the loop has nothing ready and would block
 * while gather(userdata) says that several answers are awaited, it first sleeps for window, so that
 * what arrives meanwhile is dispatched after one wake-up instead of one wake-up each; what is ready
 * when it looks is never delayed, nor is a lone answer awaited. Events that arrive during the sleep
 * (timers, signals included) wait at most window. window 0 or gather NULL: sd_event_loop(). Returns
 * what sd_event_loop() returns. */
int cn_event_loop(sd_event *e, usec_t window, bool (*gather)(void *userdata), void *userdata);

/* sd_notify wrappers; a no-op outside systemd. status may be NULL. Return what sd_notify returns.
 * Control characters in a status become spaces, so that no value can add an assignment. Every
 * message with a variable part goes through these. */
int cn_notify_ready(const char *status);
int cn_notify_ready_status(const char *fmt, ...) _printf_(1, 2);
int cn_notify_status(const char *fmt, ...) _printf_(1, 2);
int cn_notify_stopping(void);
int cn_notify_reloading(void);
