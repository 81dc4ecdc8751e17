"""How the sandbox's kube-apiserver authenticates to webhooks: its AdmissionConfiguration.

`--admission-control-config-file` points the MutatingAdmissionWebhook and
ValidatingAdmissionWebhook plugins at a kubeconfig whose `users` say which client
certificate to present to which webhook host; `*` presents the sandbox's webhook-client
certificate (issued by the cluster CA, `pki.webhook_client`) to every webhook. Webhooks
that ask for no certificate (the neighbours') are unaffected; `gangkeeper serve
--client-ca <cluster CA>` requires it, which is what a production install can do.

May write the two files into the directory it is given; nothing else.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from .pki import KeyPair

WEBHOOK_PLUGINS = ("MutatingAdmissionWebhook", "ValidatingAdmissionWebhook")


def write_admission_config(directory: Path, client: KeyPair) -> Path:
    """Write the AdmissionConfiguration and its webhook kubeconfig; the config's path."""
    directory.mkdir(parents=True, exist_ok=True)
    kubeconfig = directory / "webhook-client.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1",
        "kind": "Config",
        # The name is matched against the webhook's host[:port]; `*` matches all.
        "users": [{"name": "*", "user": {
            "client-certificate": str(client.cert.resolve()),
            "client-key": str(client.key.resolve()),
        }}],
    }))
    config = directory / "admission-config.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AdmissionConfiguration",
        "plugins": [
            {
                "name": plugin,
                "configuration": {
                    "apiVersion": "apiserver.config.k8s.io/v1",
                    "kind": "WebhookAdmissionConfiguration",
                    "kubeConfigFile": str(kubeconfig.resolve()),
                },
            }
            for plugin in WEBHOOK_PLUGINS
        ],
    }))
    return config
