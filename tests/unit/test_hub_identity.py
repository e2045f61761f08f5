"""Who a server belongs to and how its kernels reach it, when JupyterHub spawned it.

The end-to-end proof is tests/integration/test_jupyterhub.py; these pin the rules it relies on.
"""

from __future__ import annotations

import pytest

from deerflow.config.paths import UnsafeIdError
from deerflow_jupyter.app import server_owner
from deerflow_kernel.backend import backend_key, select_backend

HUB_KERNEL_ENV = {
    "DEERFLOW_SERVER_URL": "http://127.0.0.1:41234/user/alice/",
    "JUPYTERHUB_API_TOKEN": "hub-token",
    "JUPYTERHUB_USER": "alice",
}


def test_the_hub_user_owns_the_server_whatever_the_os_user_or_deerflow_user():
    assert server_owner(None, {"JUPYTERHUB_USER": "alice", "DEERFLOW_USER": "root"}) == "alice"
    assert server_owner(None, {"DEERFLOW_USER": "carol"}) == "carol"
    assert server_owner("operator-choice", {"JUPYTERHUB_USER": "alice"}) == "operator-choice"


def test_a_hub_user_name_that_cannot_be_a_path_component_is_refused_with_its_reason():
    with pytest.raises(UnsafeIdError, match=r"invalid user id '\.\./bob'"):
        server_owner(None, {"JUPYTERHUB_USER": "../bob"})


def test_a_kernel_under_the_hub_calls_its_server_under_the_users_base_url_with_the_hub_token():
    backend = select_backend(HUB_KERNEL_ENV)
    try:
        assert backend.api == "http://127.0.0.1:41234/user/alice/deerflow/api/"
        assert backend._http.headers["Authorization"] == "token hub-token"
    finally:
        backend.close()


def test_an_exported_server_token_wins_and_a_new_token_rebuilds_the_backend():
    exported = {**HUB_KERNEL_ENV, "DEERFLOW_SERVER_TOKEN": "server-token"}
    backend = select_backend(exported)
    try:
        assert backend._http.headers["Authorization"] == "token server-token"
    finally:
        backend.close()
    assert backend_key(exported) != backend_key(HUB_KERNEL_ENV)


def test_artifact_links_are_origin_relative_so_the_browser_goes_through_the_hub():
    backend = select_backend(HUB_KERNEL_ENV)
    try:
        url = backend.artifact_url("t1", "/mnt/user-data/outputs/report one.md")
    finally:
        backend.close()
    assert url == "/user/alice/deerflow/api/threads/t1/artifacts/report%20one.md"
