#!/usr/bin/env python3
"""Idle-client memory of sluice: RSS growth per idle client connection.

Starts the sluice binary in front of a MySQL server, opens N logged-in client connections that
stay idle, and reports (RSS after - RSS before) / N. Usage:

    idle_memory.py --sluice target/release/sluice --backend 127.0.0.1:3306 \
        --user bench:bench [--clients 10000]
"""
import argparse
import resource
import socket
import subprocess
import sys
import time

import pymysql


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--backend", required=True)
    ap.add_argument("--user", required=True, help="NAME:PASSWORD, also used on the backend")
    ap.add_argument("--clients", type=int, default=10000)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < a.clients + 100:
        sys.exit(f"open-files hard limit {hard} is below {a.clients}")
    port = free_port()
    name, password = a.user.split(":", 1)
    proc = subprocess.Popen(
        [a.sluice, "--listen", f"127.0.0.1:{port}", "--backend", a.backend, "--user", a.user,
         "--pool-size", "4", "--max-client-connections", str(a.clients + 100)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 10
        while True:
            try:
                warm = pymysql.connect(host="127.0.0.1", port=port, user=name, password=password)
                break
            except pymysql.err.OperationalError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        with warm.cursor() as c:
            c.execute("SELECT 1")
        time.sleep(0.5)
        before = rss_kib(proc.pid)
        conns = []
        t0 = time.time()
        for _ in range(a.clients):
            conns.append(pymysql.connect(host="127.0.0.1", port=port, user=name, password=password))
        took = time.time() - t0
        time.sleep(1.0)
        after = rss_kib(proc.pid)
        # Every idle client still answers.
        for c in conns[:: max(1, a.clients // 50)]:
            c.ping(reconnect=False)
        per = (after - before) / a.clients
        print(f"clients={a.clients} rss_before_kib={before} rss_after_kib={after} "
              f"per_client_kib={per:.2f} connect_s={took:.1f}")
        for c in conns:
            c.close()
    finally:
        proc.terminate()
        proc.wait(timeout=20)


if __name__ == "__main__":
    main()
