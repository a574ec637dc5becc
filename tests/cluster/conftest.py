"""The cluster label's Ray clusters (rpa._local_cluster): two worker slots (and 2 of the
custom resource rpa_slot) for the module, and one; both start their workers with this folder on
PYTHONPATH, so that they import cluster_kernels."""
import os

import pytest

from rpa._local_cluster import LocalCluster, loopback_environment

loopback_environment()  # before ray is imported
HERE = os.path.dirname(os.path.abspath(__file__))


def Cluster(cpus, resources=None):  # pylint: disable=invalid-name
    return LocalCluster(cpus, resources, pythonpath=HERE)


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(2, {"rpa_slot": 2})
    yield c
    c.stop()


@pytest.fixture(scope="module")
def one_worker():
    c = Cluster(1)
    yield c
    c.stop()
