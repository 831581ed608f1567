"""`revati bench`: one emulated deployment under load, measured in virtual time.

A Timekeeper, the real engine (`vllm serve` or SGLang's server) on emulated GPUs, and the
real `vllm bench serve` as the load generator, all in one virtual time: the latencies the
client measures are what the emulated GPUs would give. Writes OUT/summary.json (every key
`vllm bench serve --save-result` writes, plus wall_s, num_gpu_blocks, predictor_coverage,
attention_by_batch_s, unseen_kernel_share, launch_only_share), OUT/requests.csv (one row per
request), and keeps OUT/engine.log and OUT/client.log.

    options     the command's options, written once (CLI, tuner)
    checks      the options checked before anything starts
    server      the engine's server on emulated GPUs, and the run
    deployment  the Timekeeper and the processes on its clock, their logs
    network     the deployment's private network
    load        what the load generator is asked to send
    results     summary.json and requests.csv
    compare     `revati validate`: a real run's requests replayed, metrics side by side
"""
