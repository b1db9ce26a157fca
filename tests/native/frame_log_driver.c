/* Drives tests/native/frame_log/frame_log.c: appends, a reader that holds read lock 2 while
 * a checkpoint fails to restart the log, then a restart, each step a task.
 *     frame_log_driver */
#include <stdint.h>
#include <stdio.h>

#include "gigi_probe.h"

typedef struct frame_log frame_log;
extern int log_lock_shared(frame_log *log, int lock_idx);
extern void log_unlock_shared(frame_log *log, int lock_idx);
extern uint32_t log_append(frame_log *log, const char *data, int n);
extern int log_restart(frame_log *log);

#include <stdlib.h>

int main(void) {
    static char data[64 * 8];
    frame_log *log = calloc(1, 1 << 20);
    int64_t t = gigi_task_begin("append 5", 0);
    log_append(log, data, 5);
    gigi_task_end(t);
    int64_t reader = gigi_task_begin("reader", 0);
    log_lock_shared(log, 2);
    t = gigi_task_begin("append 3", 0);
    log_append(log, data, 3);
    gigi_task_end(t);
    t = gigi_task_begin("checkpoint", 1);
    int first = log_restart(log); /* the reader holds lock 2: no restart */
    gigi_task_end(t);
    log_unlock_shared(log, 2);
    gigi_task_end(reader);
    t = gigi_task_begin("checkpoint", 1);
    int second = log_restart(log);
    gigi_task_end(t);
    t = gigi_task_begin("append 2", 0);
    log_append(log, data, 2);
    gigi_task_end(t);
    printf("%d %d\n", first, second);
    return 0;
}
