"""The model: the contract every model keeps (base), NCAE (estimator) and its settings (config);
the network's forward and backward (network), an epoch (loop), pre-training, early stopping,
the fit driver (trainer), one model across processes (distributed); the fit's data (fitdata,
augment), evaluation (evaluate, metrics) and the model and checkpoint files (modelfile).
"""
