"""The agent: a Model (OpenAI-compatible endpoint or scripted), its tools and the policy guarding them."""
