"""The image's entry point (Dockerfile): run `minikraft ARGS` as the unprivileged `minikraft`.

Started as root, it first hands the node's directories to that user when it does not own them
yet: Docker creates a missing bind-mount source as root, so a fresh `./compose-data/broker-101`
would otherwise be unwritable to the node. The journal directory is shared by every broker and
by clients on the host (`minikraft chaos` writes its ack journal there), so it is made
world-writable with the sticky bit, as /tmp is. Then it drops to the user for good and execs
`minikraft`; started as any other user, it execs straight away.
"""

from __future__ import annotations

import os
import pwd
import sys
from pathlib import Path

NODE_USER = "minikraft"
DATA_DIR = Path("/var/lib/minikraft")
JOURNAL_DIR = Path("/var/lib/minikraft-journal")
NODE_COMMANDS = frozenset({"controller", "broker"})


def hand_over(directory: Path, uid: int, gid: int, mode: int) -> None:
    """Give directory (and, the first time, what is under it) to uid:gid; a directory already
    owned by the user is left as it is (a restart does not walk the data)."""
    directory.mkdir(parents=True, exist_ok=True)
    if directory.stat().st_uid != uid:
        for root, dirs, files in os.walk(directory):
            for name in [*dirs, *files]:
                os.lchown(os.path.join(root, name), uid, gid)
        os.chown(directory, uid, gid)
    os.chmod(directory, mode)


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if os.geteuid() == 0:
        user = pwd.getpwnam(NODE_USER)
        if args and args[0] in NODE_COMMANDS:
            hand_over(DATA_DIR, user.pw_uid, user.pw_gid, 0o755)
            hand_over(JOURNAL_DIR, user.pw_uid, user.pw_gid, 0o1777)
        os.setgroups([])
        os.setgid(user.pw_gid)
        os.setuid(user.pw_uid)
        os.environ["HOME"] = user.pw_dir
        os.environ["USER"] = NODE_USER
    os.execvp("minikraft", ["minikraft", *args])


if __name__ == "__main__":
    main()
