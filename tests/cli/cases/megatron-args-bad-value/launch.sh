torchrun --nnodes 2 --nproc_per_node 8 pretrain_gpt.py \
  --tensor-model-parallel-size 8 \
  --pipeline-model-parallel-size $PP
