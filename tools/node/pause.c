/* The test node's sandbox ("pause") process: holds the pod's namespaces open, exits on SIGINT/SIGTERM and, as PID 1
 * of a pod that shares its PID namespace, reaps orphans. Built static (tools/node/images.sh), imported as the
 * node's pause image; no registry is reachable, so it cannot be pulled. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { _exit(128 + sig); }

static void reap(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    struct sigaction on_stop = {.sa_handler = stop};
    struct sigaction on_child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
    sigaction(SIGINT, &on_stop, NULL);
    sigaction(SIGTERM, &on_stop, NULL);
    sigaction(SIGCHLD, &on_child, NULL);
    for (;;) pause();
    return EXIT_SUCCESS;
}
