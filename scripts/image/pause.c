/*
 * The pod sandbox's first process (containerd's sandbox_image runs it): it holds the Pod's namespaces open,
 * reaps the orphans the kernel hands to a namespace's PID 1, and exits 0 on SIGTERM or SIGINT.
 *
 * The signals are blocked and taken with sigwait(), so no handler runs and nothing races: a PID 1 ignores
 * signals it has no handler for unless they are blocked, and a blocked signal stays pending until taken.
 * Static (gcc -static): the image holds this file alone.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void reap_children(void) {
  /* Every child that has exited; 0 means some are still running, -1 (ECHILD) that there are none. */
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(int argc, char **argv) {
  (void)argv;
  if (argc > 1) {
    fprintf(stderr, "pause: takes no arguments\n");
    return 2;
  }
  /* A disposition inherited as ignored (a shell's background job ignores SIGINT) would not matter to sigwait,
   * but the default is what a container's PID 1 gets anyway. */
  signal(SIGTERM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  signal(SIGCHLD, SIG_DFL);
  sigset_t waited;
  sigemptyset(&waited);
  sigaddset(&waited, SIGTERM);
  sigaddset(&waited, SIGINT);
  sigaddset(&waited, SIGCHLD);
  if (sigprocmask(SIG_BLOCK, &waited, NULL) != 0) {
    fprintf(stderr, "pause: sigprocmask: %s\n", strerror(errno));
    return 1;
  }
  if (getpid() != 1) fprintf(stderr, "pause: running as PID %d, not 1: orphans are reaped elsewhere\n", (int)getpid());
  /* Children that exited before the mask was set left no pending SIGCHLD behind: reap them now. */
  reap_children();
  for (;;) {
    int signal_number = 0;
    int error = sigwait(&waited, &signal_number);
    if (error != 0) {
      fprintf(stderr, "pause: sigwait: %s\n", strerror(error));
      return 1;
    }
    if (signal_number == SIGCHLD) {
      reap_children();
      continue;
    }
    return 0;
  }
}
