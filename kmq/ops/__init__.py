"""Operations on a deployment: dead letters (list, redrive, purge) and tenants."""
