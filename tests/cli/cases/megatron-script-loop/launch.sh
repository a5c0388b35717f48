#!/bin/bash
while true; do sleep 1; done
torchrun pretrain_gpt.py
