-- Distributes the stacklens schema over a Citus cluster (run once on the coordinator,
-- after `stacklens migrate`). Jobs and their runs are small reference tables copied to
-- every node;
-- everything per rank is distributed by job_id and co-located, so a job's queries run
-- on one shard group; fabric samples are distributed by port.
-- NOT RUN on the development machines (no Citus packages or Docker engine there).
SELECT create_reference_table('jobs');
SELECT create_reference_table('runs');
SELECT create_reference_table('run_processes');
SELECT create_reference_table('mpi_ops');
SELECT create_distributed_table('ranks', 'job_id');
SELECT create_distributed_table('received_frames', 'job_id', colocate_with => 'ranks');
SELECT create_distributed_table('p2p_deltas', 'job_id', colocate_with => 'ranks');
SELECT create_distributed_table('op_deltas', 'job_id', colocate_with => 'ranks');
SELECT create_distributed_table('op_hist_deltas', 'job_id', colocate_with => 'ranks');
SELECT create_distributed_table('coll_deltas', 'job_id', colocate_with => 'ranks');
SELECT create_distributed_table('rma_deltas', 'job_id', colocate_with => 'ranks');
SELECT create_distributed_table('io_deltas', 'job_id', colocate_with => 'ranks');
SELECT create_reference_table('fabric_nodes');
SELECT create_reference_table('fabric_ports');
SELECT create_reference_table('fabric_links');
SELECT create_reference_table('fabric_lfts');
SELECT create_reference_table('fabric_events');
SELECT create_distributed_table('fabric_port_samples', 'port_id');
