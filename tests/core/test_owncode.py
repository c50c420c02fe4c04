"""Whose code a frame is: one reading for live stacks, pasted dumps and the advice."""

from __future__ import annotations

from debug_stuck.core.owncode import entry_script_roots, is_library_code


def test_a_library_is_one_wherever_it_is_installed_and_the_jobs_own_package_stays_its_own():
    roots = entry_script_roots(["/work/proj/train.py", "/work/proj/.venv/lib/python3.11/site-packages/x.py", None])
    assert roots == ["/work/proj"]
    # installed: a library even inside the project's folder (a venv there)
    venv_torch = "/work/proj/.venv/lib/python3.11/site-packages/torch/nn/modules/module.py"
    assert is_library_code("torch/nn/modules/module.py", venv_torch, roots)
    # a pip --target folder or PYTHONPATH: py-spy's short name starts with the package
    assert is_library_code("joblib/parallel.py", "/tmp/pkgs/joblib/parallel.py", roots)
    # the project's own datasets/ package, imported from the script's folder: the job's code
    assert not is_library_code("datasets/shards.py", "/work/proj/datasets/shards.py", roots)
    assert is_library_code("datasets/arrow_dataset.py", "/opt/hf/datasets/arrow_dataset.py", roots)
    # the standard library by its short name (a pasted dump has no path), the job's script by its own
    assert is_library_code("threading.py", None)
    assert not is_library_code("train.py", "/work/proj/train.py", roots)
    assert not is_library_code("datasets.py", None)  # a script that happens to share a package's name


def test_a_response_body_read_is_told_from_a_wait_for_the_headers():
    from debug_stuck.core.libfacts import called_function, reads_response_body

    # py-spy's frames of a requests download stalled mid-body (recorded on this machine, innermost first)
    body = [
        ("SocketIO.readinto", "socket.py"),
        ("HTTPResponse.read", "http/client.py"),
        ("HTTPResponse._fp_read", "urllib3/response.py"),
        ("HTTPResponse.stream", "urllib3/response.py"),
        ("Response.iter_content.<locals>.generate", "requests/models.py"),
        ("<module>", "download.py"),
    ]
    assert reads_response_body(body)
    headers = [
        ("SocketIO.readinto", "socket.py"),
        ("HTTPResponse._read_status", "http/client.py"),
        ("HTTPResponse.begin", "http/client.py"),
        ("HTTPConnection.getresponse", "http/client.py"),
        ("<module>", "upload.py"),
    ]
    assert not reads_response_body(headers)
    assert called_function("Response.iter_content.<locals>.generate") == "iter_content"
    assert called_function("Session.get") == "get"


def test_a_queue_feeder_is_writing_only_when_it_is_inside_a_send():
    from debug_stuck.core.libfacts import feeder_writing

    tail = [("Queue._feed", "multiprocessing/queues.py"), ("Thread.run", "threading.py")]
    # every live multiprocessing queue has a feeder idle in notempty.wait() (recorded: ProcessPoolExecutor)
    assert not feeder_writing([("Condition.wait", "threading.py"), *tail])
    assert feeder_writing(
        [("_send", "multiprocessing/connection.py"), ("send_bytes", "multiprocessing/connection.py"), *tail]
    )
    assert not feeder_writing([("Condition.wait", "threading.py")])
