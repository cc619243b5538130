"""The debootstrap base image: made once per session, runs, points apt at the mirror it was made from."""

from __future__ import annotations

import pytest

from toolkit.image.base import _mirrors_from, apt_mirror

pytestmark = pytest.mark.slow


def test_base_image_runs_and_has_apt(docker_client, base_image):
    img = docker_client.images.get(base_image)
    assert img.labels["dev.toolkit.base.suite"] == "bookworm"
    logs = docker_client.containers.run(base_image, ["bash", "-c", "cat /etc/apt/sources.list; command -v apt-get"],
                                        remove=True, network_mode="none")
    text = logs.decode()
    assert f"deb {img.labels['dev.toolkit.base.mirror']} bookworm main" in text
    assert "/usr/bin/apt-get" in text


def test_build_base_command_is_cached(cli, base_image, docker_client):
    r = cli("build", "base", "--json")
    assert r.returncode == 0, r.stderr
    assert docker_client.images.get(base_image).id in r.stdout


def test_mirror_parsing_both_formats():
    deb822 = "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n\n" \
             "Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\n"
    assert _mirrors_from(deb822, deb822=True) == [("http://mirror.example/debian", ["bookworm", "bookworm-updates"])]
    one_line = "# comment\ndeb [arch=amd64] http://m.example/debian trixie main\ndeb-src http://x trixie main\n"
    assert _mirrors_from(one_line, deb822=False) == [("http://m.example/debian", ["trixie"])]
    assert apt_mirror("bookworm").startswith(("http://", "https://", "file:/"))
