# GPT-3 175B on 1,024 GPUs as a Megatron-LM launch line (the layout of the README's first command):
# trainsim run -t topologies/dgx-a100-superpod.json -w workloads/gpt3-175b.json --megatron-args THIS
torchrun --nnodes 128 --nproc_per_node 8 pretrain_gpt.py \
  --tensor-model-parallel-size 8 --pipeline-model-parallel-size 8 \
  --num-layers-per-virtual-pipeline-stage 4 --sequence-parallel --recompute-activations \
  --num-layers 96 --hidden-size 12288 --num-attention-heads 96 \
  --seq-length 2048 --max-position-embeddings 2048 \
  --micro-batch-size 1 --global-batch-size 1536 --bf16 \
  --lr 6.0e-5 --min-lr 6.0e-6 --lr-decay-style cosine --train-iters 100000 \
  --data-path my-gpt_text_document --vocab-file gpt2-vocab.json --merge-file gpt2-merges.txt \
  --log-interval 10 --save-interval 1000
