"""torch.distributed's env:// variables for a job started by ``mpirun``.

A torch script calls ``dist.init_process_group("gloo")`` (env://), which reads RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT; torchrun sets them, mpirun does not. Importing shardwise.torch
derives the missing ones from Open MPI's launch variables, without communicating:

  RANK, WORLD_SIZE              OMPI_COMM_WORLD_RANK / _SIZE
  LOCAL_RANK, LOCAL_WORLD_SIZE  OMPI_COMM_WORLD_LOCAL_RANK / _LOCAL_SIZE
  MASTER_ADDR                   127.0.0.1 when every rank is on one node (multi-node jobs must
                                pass it: ``mpirun -x MASTER_ADDR=<rank 0's host>``)
  MASTER_PORT                   a port in [20000, 30000) hashed from the job id, which every rank
                                of the job reads alike (and another concurrent job most likely not)

Variables already set are left alone. Outside mpirun (no OMPI_COMM_WORLD_SIZE) nothing is set.
"""

import os
import zlib

_PORT_BASE, _PORT_RANGE = 20000, 10000


def _job_id(environ):
    for key in ("OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "OMPI_MCA_orte_hnp_uri"):
        if environ.get(key):
            return environ[key]
    return None


def derived_variables(environ=None):
    """The env:// variables an mpirun launch implies, as {name: value} (empty outside one)."""
    environ = os.environ if environ is None else environ
    if "OMPI_COMM_WORLD_SIZE" not in environ or "OMPI_COMM_WORLD_RANK" not in environ:
        return {}
    size = environ["OMPI_COMM_WORLD_SIZE"]
    out = {"RANK": environ["OMPI_COMM_WORLD_RANK"], "WORLD_SIZE": size}
    local_size = environ.get("OMPI_COMM_WORLD_LOCAL_SIZE")
    if "OMPI_COMM_WORLD_LOCAL_RANK" in environ:
        out["LOCAL_RANK"] = environ["OMPI_COMM_WORLD_LOCAL_RANK"]
    if local_size is not None:
        out["LOCAL_WORLD_SIZE"] = local_size
    if local_size == size or environ.get("OMPI_MCA_orte_num_nodes") == "1":
        out["MASTER_ADDR"] = "127.0.0.1"
    job = _job_id(environ)
    if job is not None:
        out["MASTER_PORT"] = str(_PORT_BASE + zlib.crc32(job.encode()) % _PORT_RANGE)
    return out


def set_torch_distributed_env():
    """Sets the variables ``derived_variables`` gives that are not set yet; returns those set."""
    added = {k: v for k, v in derived_variables().items() if k not in os.environ}
    os.environ.update(added)
    return added
