"""The Order table."""

from django.db import migrations, models


class Migration(migrations.Migration):
    """Create shop_order."""

    initial = True
    dependencies = []  # noqa: RUF012 - Django's declarative style
    operations = [  # noqa: RUF012
        migrations.CreateModel(
            name="Order",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("note", models.CharField(max_length=200)),
            ],
        )
    ]
