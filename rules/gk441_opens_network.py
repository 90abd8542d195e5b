from __future__ import annotations

from gatekeeper.report import Category, Severity
from gatekeeper.analyses.cpp_source import cpp_calls
from gatekeeper.analyses.harness_support import UseRule
from gatekeeper.static.cpp_sources import CppSource
from gatekeeper.static.examples import Invalid, Valid, snippet

CPP_NETWORK = frozenset({
    "socket", "getaddrinfo", "gethostbyname", "inet_pton", "sendto", "recvfrom",
    "curl_easy_init", "curl_easy_perform",
})


class OpensNetwork(UseRule):
    """Uses the network: `socket`, `ssl`, `urllib`, `http.client` / `http.server`,
    `requests`, `httpx`, `aiohttp`, `urllib3`, `ftplib`, `smtplib`, `xmlrpc`, websockets,
    `paramiko`, `grpc`, `zmq`, and `torch.hub` downloads; in C++/CUDA sources `socket(`,
    `getaddrinfo(`, `gethostbyname(`, `curl_easy_*`.

    Why it games the benchmark: a submission with the network can fetch a precomputed
    answer or a prebuilt binary, report the harness's inputs elsewhere, or receive
    instructions; none of that is in the code that was checked.

    Not flagged: `torch.distributed` (collectives, judged by other rules) and mentions in
    strings or comments.
    """

    code = "GK441"
    name = "OpensNetwork"
    category = Category.SANDBOX_ESCAPE
    severity = Severity.ERROR
    summary = "uses the network"
    message = "`{name}` uses the network, which the sandbox does not allow a submission."
    hint = "Remove the network access. Everything the kernel needs must be in the submission's own files."
    NAMES = ("socket", "ssl", "urllib", "urllib2", "urllib3", "http.client", "http.server", "requests",
             "httpx", "aiohttp", "ftplib", "smtplib", "telnetlib", "xmlrpc", "websocket", "websockets",
             "paramiko", "grpc", "zmq", "asyncio.open_connection", "torch.hub.load",
             "torch.hub.download_url_to_file", "torch.hub.load_state_dict_from_url")
    VALID = [
        Valid(snippet("""
            import torch
            # no requests or socket here
            url_note = 'see https://example.org'
        """)),
        Valid(snippet("""
            import torch.distributed as dist
            ws = dist.get_world_size() if dist.is_initialized() else 1
        """)),
    ]
    INVALID = [
        Invalid(snippet("""
            import requests
            w = requests.get('http://10.0.0.1/out.pt').content
        """), line=2, message="`requests.get` uses the network"),
        Invalid(snippet("""
            from urllib.request import urlopen as uo
            data = uo('http://x/y').read()
        """), line=2, message="`urllib.request.urlopen` uses the network"),
        Invalid(snippet("""
            import socket
            s = socket.create_connection(('10.0.0.1', 9000))
        """), line=2, message="`socket.create_connection` uses the network"),
        Invalid("import httpx\n", line=1, message="`httpx` uses the network"),
        Invalid(snippet("""
            src = '''
            #include <sys/socket.h>
            int f() { return socket(AF_INET, SOCK_STREAM, 0); }
            '''
        """), line=3, message="`socket()` uses the network"),
    ]

    def check_cpp(self, source: CppSource) -> None:
        for _, tok in cpp_calls(source, CPP_NETWORK):
            self.report_cpp(source, tok.offset, self.message.format(name=f"{tok.text}()") + " (in the C++/CUDA source)",
                            evidence={"name": tok.text})
