PP=two
ARGS=(--pipeline-model-parallel-size $PP)
torchrun --nnodes=2 --nproc_per_node=8 pretrain_gpt.py "${ARGS[@]}"
