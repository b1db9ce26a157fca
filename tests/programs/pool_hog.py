"""A pool of two slots served first come, first served; one "hog" task keeps a slot for 1.5 s
while seven threads run 150 short requests through the other: what a new user writes first.
Usage: python pool_hog.py TRACE_DIR"""

import itertools
import sys
import threading
import time

import gigi.probes as gp


class Pool:
    def __init__(self, slots: int) -> None:
        self.res = gp.resource("app.pool", capacity=slots, unit="slots", sharing="pool")
        self.free = list(range(1, slots + 1))
        self.cond = threading.Condition()
        self.tickets = itertools.count()
        self.serving = 0

    def take(self) -> int:
        with self.cond:
            ticket = next(self.tickets)
            if not self.free or ticket != self.serving:
                with self.res.wait():
                    self.cond.wait_for(lambda: self.free and ticket == self.serving)
            self.serving += 1
            slot = self.free.pop()
            self.cond.notify_all()
        self.res.acquire(object=slot)
        return slot

    def give(self, slot: int) -> None:
        self.res.release(object=slot)
        with self.cond:
            self.free.append(slot)
            self.cond.notify_all()


def main() -> None:
    gp.enable(sys.argv[1])
    pool = Pool(2)
    requests = iter(range(150))
    lock = threading.Lock()

    def hog():
        with gp.task("hog"):
            slot = pool.take()
            pool.res.use(object=slot)
            time.sleep(1.5)
            pool.give(slot)

    def worker():
        time.sleep(0.02)
        while True:
            with lock:
                n = next(requests, None)
            if n is None:
                return
            with gp.task(f"request {n}"):
                slot = pool.take()
                pool.res.use(object=slot)
                time.sleep(0.008)
                pool.give(slot)

    threads = [threading.Thread(target=hog)] + [threading.Thread(target=worker) for _ in range(7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    gp.disable()


if __name__ == "__main__":
    main()
